#include "rlx/transport/bounded_spin.h"

#include <gtest/gtest.h>

namespace rlx {
namespace {

using namespace std::chrono_literals;

TEST(BoundedSpin, TriesOnceWithoutABound) {
  int tries = 0;
  EXPECT_FALSE(BoundedSpin{}.until([&] { return ++tries > 1; }));
  EXPECT_EQ(tries, 1);
}

TEST(BoundedSpin, StopsWhenReadyOrWhenTheBoundPasses) {
  int tries = 0;
  EXPECT_TRUE((BoundedSpin{.bound = 10s}.until([&] { return ++tries == 3; })));
  EXPECT_EQ(tries, 3);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE((BoundedSpin{.bound = 2ms, .yield = true}.until([] { return false; })));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 2ms);
}

}  // namespace
}  // namespace rlx
