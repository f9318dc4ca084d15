#include "rlx/collectives/cost_model.h"

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "rlx/collectives/tuning.h"
#include "rlx/transport/errors.h"

namespace rlx {
namespace {

using namespace std::chrono_literals;

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
TEST(CostModelFile, ReadsBothSituationsAndIgnoresComments) {
  const CostModelFile file = parse_cost_model_file(
      "# fitted by bench/scaling\n"
      "dedicated 9e-06 2e-10 6e-11\n"
      "\n"
      "shared 4.4e-05 3.6e-10 2.3e-10  # 4 ranks on 2 cores\n",
      "fitted.txt");
  ASSERT_TRUE(file.dedicated_cores && file.shared_cores);
  EXPECT_DOUBLE_EQ(file.dedicated_cores->alpha, 9e-6);
  EXPECT_DOUBLE_EQ(file.shared_cores->gamma, 2.3e-10);
  EXPECT_FALSE(parse_cost_model_file("shared 1 2 3\n", "f").dedicated_cores);
  const CostModelFile shm = parse_cost_model_file("shm-dedicated 2e-7 1e-10 0\n", "f");
  ASSERT_TRUE(shm.shm_dedicated_cores);
  EXPECT_DOUBLE_EQ(shm.shm_dedicated_cores->alpha, 2e-7);
}

// The hierarchical all-reduce pays when shared memory is cheaper than the
// network, and the prediction follows the constants it is given.
TEST(CostModel, HierarchyIsPredictedFromBothModels) {
  const double mib = 1 << 20;
  const auto rails = predict_hierarchy(kFittedCost, kFittedShmCost, 6, 3, 2, true, 16 * mib);
  EXPECT_LT(rails.hierarchical, rails.flat);
  EXPECT_DOUBLE_EQ(rails.flat, all_reduce_network_seconds(kFittedCost, 6, 16 * mib));
  // Shared memory as slow as a network step costs a second: flat wins.
  const CostModel slow{.alpha = 1, .beta = 1e-6, .gamma = 0};
  const auto leaders = predict_hierarchy(kFittedCost, slow, 4, 3, 2, false, 4096);
  EXPECT_GT(leaders.hierarchical, leaders.flat);
}

TEST(CostModelFile, MalformedFilesAreRefusedNamingFileAndLine) {
  auto refused = [](const std::string& text, const std::string& fragment) {
    try {
      parse_cost_model_file(text, "model.txt");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const CollectiveError& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find("RLX_COST_MODEL=model.txt"), std::string::npos) << what;
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
    }
  };
  refused("dedicated 1e-6 2e-10\n", "line 1");
  refused("# ok\nfast 1 2 3\n", "line 2: 'fast' is none of dedicated, shared, shm-dedicated");
  refused("dedicated 1 2 3 4\n", "line 1");
  refused("dedicated -1 2 3\n", "not negative");
  refused("dedicated nan 2 3\n", "line 1");  // not a number to the stream either
  refused("# nothing\n", "no constants");
  EXPECT_THROW(read_cost_model_file("/nonexistent/rlx-cost-model", 1s), CollectiveError);
  // Anything RLX_COST_MODEL may name is read with bounds: no endless read.
  try {
    read_cost_model_file("/dev/zero", 1s);
    ADD_FAILURE() << "/dev/zero was read as a cost model";
  } catch (const CollectiveError& error) {
    EXPECT_NE(std::string(error.what()).find("is not a text file"), std::string::npos)
        << error.what();
  }
}

TEST(Tuning, ComesFromTheSettingsAndTheCostModelFile) {
  launch_env::LaunchEnv env;
  EXPECT_EQ(tuning_for(env).cost.alpha, kFittedCost.alpha);
  env.all_reduce_algorithm = launch_env::AllReduceAlgorithm::ring;
  ASSERT_EQ(tuning_for(env).forced.size(), 1u);
  EXPECT_EQ(tuning_for(env).forced[0].algorithm, "ring");
  EXPECT_FALSE(tuning_for(env).forced[0].strict);

  const std::string path = ::testing::TempDir() + "rlx_cost_model_test.txt";
  std::ofstream(path) << "dedicated 1e-05 1e-10 1e-10\n";
  env.cost_model_file = path;
  const Tuning tuning = tuning_for(env);
  EXPECT_DOUBLE_EQ(tuning.cost.alpha, 1e-5);
  EXPECT_NE(tuning.cost_source.find(path), std::string::npos);
  env.cost_model_file = path + ".missing";
  EXPECT_THROW(tuning_for(env), CollectiveError);
  std::remove(path.c_str());
}

}  // namespace rlx
