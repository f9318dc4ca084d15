#include "rlx/core/memory_plan.h"

#include <random>

#include <gtest/gtest.h>

namespace rlx::detail {
namespace {

TEST(ArenaLayout, BuffersAliveTogetherNeverOverlapAndOthersShare) {
  const std::vector<BufferLifetime> chain{{0, 1, 100}, {1, 2, 100}, {2, 3, 100}, {3, 4, 100}};
  const ArenaLayout layout = lay_out_arena(chain, 64);
  EXPECT_EQ(layout.bytes, 256u);  // two 128-byte slots, alternating
  EXPECT_EQ(layout.offsets[0], layout.offsets[2]);
  EXPECT_NE(layout.offsets[0], layout.offsets[1]);
  for (std::size_t offset : layout.offsets) EXPECT_EQ(offset % 64, 0u);
}

TEST(ArenaLayout, RandomLifetimesNeverCollide) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLifetime> buffers;
    const int n = 1 + static_cast<int>(random() % 40);
    for (int i = 0; i < n; ++i) {
      const std::size_t first = random() % 30;
      buffers.push_back({first, first + random() % 10, random() % 5000});
    }
    const ArenaLayout layout = lay_out_arena(buffers, 64);
    for (int a = 0; a < n; ++a) {
      EXPECT_LE(layout.offsets[a] + buffers[a].bytes, layout.bytes);
      for (int b = a + 1; b < n; ++b) {
        const bool together = buffers[a].first_step <= buffers[b].last_step &&
                              buffers[b].first_step <= buffers[a].last_step;
        const bool apart = layout.offsets[a] + buffers[a].bytes <= layout.offsets[b] ||
                           layout.offsets[b] + buffers[b].bytes <= layout.offsets[a];
        if (together) {
          EXPECT_TRUE(apart) << "trial " << trial << ": " << a << " and " << b;
        }
      }
    }
  }
}

}  // namespace
}  // namespace rlx::detail
