#include "collectives/cost_model.h"

#include <limits>

#include <gtest/gtest.h>

namespace rlx {
namespace {

TEST(CostModel, TheRingMovesTwoNMinusOneOverNOfTheBufferIn2NMinus2Steps) {
  const AlgorithmWork ring = all_reduce_ring_work(4, 1000);
  EXPECT_DOUBLE_EQ(ring.steps, 6);
  EXPECT_DOUBLE_EQ(ring.bytes_sent, 1500);
  EXPECT_DOUBLE_EQ(ring.bytes_reduced, 750);
}

TEST(CostModel, RecursiveDoublingFoldsRanksBeyondAPowerOfTwo) {
  const AlgorithmWork four = all_reduce_recursive_doubling_work(4, 1000);
  EXPECT_DOUBLE_EQ(four.steps, 2);
  EXPECT_DOUBLE_EQ(four.bytes_sent, 2000);
  EXPECT_DOUBLE_EQ(four.bytes_reduced, 2000);
  const AlgorithmWork five = all_reduce_recursive_doubling_work(5, 1000);
  EXPECT_DOUBLE_EQ(five.steps, 4);
  EXPECT_DOUBLE_EQ(five.bytes_sent, 4000);
  EXPECT_DOUBLE_EQ(five.bytes_reduced, 3000);
}

TEST(CostModel, TheCrossoverIsWhereTheRingStopsLosing) {
  const CostModel cost{.alpha = 20e-6, .beta = 0.5e-9, .gamma = 0.2e-9};
  for (int n : {2, 3, 4, 5, 8, 64, 1000}) {
    const auto bytes = static_cast<double>(all_reduce_crossover_bytes(cost, n));
    EXPECT_LE(all_reduce_ring_work(n, bytes).seconds(cost),
              all_reduce_recursive_doubling_work(n, bytes).seconds(cost) * (1 + 1e-12))
        << n;
    EXPECT_GT(all_reduce_ring_work(n, bytes - 1).seconds(cost),
              all_reduce_recursive_doubling_work(n, bytes - 1).seconds(cost))
        << n;
  }
}

TEST(CostModel, AtTwoRanksOnlyTheRingsSmallerReductionPaysForItsExtraStep) {
  const CostModel cost{.alpha = 20e-6, .beta = 0.5e-9, .gamma = 0.2e-9};
  // ring: 2 alpha + S beta + S/2 gamma; doubling: alpha + S beta + S gamma.
  EXPECT_NEAR(static_cast<double>(all_reduce_crossover_bytes(cost, 2)), 2 * 20e-6 / 0.2e-9, 1);
  EXPECT_EQ(all_reduce_crossover_bytes({.alpha = 20e-6, .beta = 1e-9, .gamma = 0}, 2),
            std::numeric_limits<std::size_t>::max());
}

}  // namespace
}  // namespace rlx
