#include "rlx/core/buffer.h"

#include <cstdint>
#include <cstring>

#include <gtest/gtest.h>

namespace rlx {
namespace {

TEST(Buffer, IsAlignedAndWritable) {
  for (std::size_t bytes :
       {std::size_t{0}, std::size_t{1}, std::size_t{100}, kMinCachedBuffer + 1}) {
    Buffer buffer = allocate_buffer(bytes);
    ASSERT_NE(buffer.get(), nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffer.get()) % kBufferAlignment, 0u);
    std::memset(buffer.get(), 0xab, bytes);
  }
}

TEST(Buffer, LargeBuffersAreReusedOnceFreed) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "the cache is off under AddressSanitizer";
#else
  Buffer first = allocate_buffer(3 * kMinCachedBuffer);
  void* const data = first.get();
  first.reset();
  Buffer second = allocate_buffer(3 * kMinCachedBuffer - 5);  // same size once page-rounded
  EXPECT_EQ(second.get(), data);
  Buffer third = allocate_buffer(3 * kMinCachedBuffer);  // the cached one is taken
  EXPECT_NE(third.get(), data);
#endif
}

}  // namespace
}  // namespace rlx
