#include "rlx/transport/spare_buffers.h"

#include <gtest/gtest.h>

namespace rlx {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

TEST(SpareBuffers, TheNextMessageOfAboutTheSameSizeReusesTheBufferGivenBack) {
  SpareBuffers spares;
  std::vector<std::byte> first = spares.take(4 * kMiB);
  ASSERT_EQ(first.size(), 4 * kMiB);
  const std::byte* storage = first.data();
  first[4 * kMiB - 1] = std::byte{7};
  spares.give_back(std::move(first));
  EXPECT_EQ(spares.kept_buffers(), 1u);
  EXPECT_EQ(spares.kept_bytes(), 4 * kMiB);

  const std::vector<std::byte> smaller = spares.take(3 * kMiB);
  EXPECT_EQ(smaller.data(), storage);
  EXPECT_EQ(smaller.size(), 3 * kMiB);
  EXPECT_EQ(spares.kept_buffers(), 0u);
  EXPECT_EQ(spares.kept_bytes(), 0u);
}

TEST(SpareBuffers, ABufferOverTwiceTheLengthOrTooShortIsNotHandedOut) {
  SpareBuffers spares;
  std::vector<std::byte> big = spares.take(8 * kMiB);
  const std::byte* storage = big.data();
  spares.give_back(std::move(big));
  EXPECT_NE(spares.take(3 * kMiB).data(), storage);  // would hold 8 MiB for 3
  EXPECT_NE(spares.take(9 * kMiB).data(), storage);  // too short
  EXPECT_EQ(spares.kept_buffers(), 1u);
  EXPECT_EQ(spares.take(4 * kMiB).data(), storage);
}

TEST(SpareBuffers, TheSmallestFittingBufferIsHandedOut) {
  SpareBuffers spares;
  std::vector<std::byte> two = spares.take(2 * kMiB), three = spares.take(3 * kMiB);
  const std::byte* storage = two.data();
  spares.give_back(std::move(three));
  spares.give_back(std::move(two));
  EXPECT_EQ(spares.take(2 * kMiB).data(), storage);
}

TEST(SpareBuffers, SmallBuffersAreNotKept) {
  SpareBuffers spares;
  spares.give_back(spares.take(SpareBuffers::kSmallest - 1));
  spares.give_back(std::vector<std::byte>{});
  EXPECT_EQ(spares.kept_buffers(), 0u);
  const std::vector<std::byte> small = spares.take(100);
  EXPECT_EQ(small.size(), 100u);
}

TEST(SpareBuffers, KeepsAtMostItsCountAndItsBytesDroppingTheOldestFirst) {
  SpareBuffers spares;
  std::vector<std::vector<std::byte>> buffers;
  for (std::size_t i = 0; i < SpareBuffers::kMostBuffers + 2; ++i)
    buffers.push_back(spares.take(kMiB));
  const std::byte* oldest = buffers.front().data();
  for (auto& buffer : buffers) spares.give_back(std::move(buffer));
  EXPECT_EQ(spares.kept_buffers(), SpareBuffers::kMostBuffers);
  for (std::size_t i = 0; i < SpareBuffers::kMostBuffers; ++i) {
    EXPECT_NE(spares.take(kMiB).data(), oldest);
  }

  // Reserved, not filled: the test does not touch half a GiB.
  SpareBuffers by_bytes;
  const std::size_t over_half = SpareBuffers::kMostBytes / 2 + kMiB;
  std::vector<std::byte> older, newer;
  older.reserve(over_half);
  newer.reserve(over_half);
  by_bytes.give_back(std::move(older));
  by_bytes.give_back(std::move(newer));
  EXPECT_EQ(by_bytes.kept_buffers(), 1u);  // both would pass kMostBytes
  EXPECT_LE(by_bytes.kept_bytes(), SpareBuffers::kMostBytes);
}

}  // namespace
}  // namespace rlx
