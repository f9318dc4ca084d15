#include "transport/tcp/lane_links.h"

#include <algorithm>
#include <thread>

#include <gtest/gtest.h>

namespace rlx::tcp {
namespace {

int cores() { return static_cast<int>(std::max(1U, std::thread::hardware_concurrency())); }

TEST(LaneLinksSpin, RanksWithACoreEachSpinWithoutGivingTheCoreAway) {
  for (int ranks : {1, cores()}) {
    const auto spin = LaneLinks::spin_for_host(ranks);
    EXPECT_FALSE(spin.yield) << ranks << " ranks on " << cores() << " cores";
    EXPECT_GT(spin.length.count(), 0);
  }
}

// The spin stays bounded however many ranks share the cores: past it a step
// sleeps in poll(), so idle ranks never burn a core.
TEST(LaneLinksSpin, RanksSharingCoresYieldOnEveryRetryForTheSameBoundedTime) {
  for (int ranks : {cores() + 1, 4 * cores(), 64}) {
    const auto spin = LaneLinks::spin_for_host(ranks);
    EXPECT_TRUE(spin.yield) << ranks << " ranks on " << cores() << " cores";
    EXPECT_EQ(spin.length, LaneLinks::spin_for_host(1).length);
    EXPECT_LE(spin.length, std::chrono::milliseconds(1));
  }
}

}  // namespace
}  // namespace rlx::tcp
