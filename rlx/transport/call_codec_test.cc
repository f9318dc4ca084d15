#include "rlx/transport/call_codec.h"

#include <gtest/gtest.h>

namespace rlx {
namespace {

TEST(CallCodec, EveryCallRoundTripsWithTheSequenceGivenApart) {
  for (int kind = 1; kind <= static_cast<int>(CollectiveKind::scatter); ++kind) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      for (int root : {-1, 0, 7, (1 << 30) - 1}) {
        const CollectiveCall call{.kind = static_cast<CollectiveKind>(kind),
                                  .op = op,
                                  .dtype = Dtype::bf16,
                                  .count = ~std::uint64_t{0},
                                  .sequence = 41,
                                  .root = root};
        EXPECT_EQ(decode_call(encode_call(call), 41), call) << call.describe();
      }
    }
  }
}

// What another process wrote is checked field by field: each byte that can
// be out of range is refused alone.
TEST(CallCodec, RefusesEveryFieldOutOfItsRange) {
  const EncodedCall valid = encode_call({.kind = CollectiveKind::all_reduce, .count = 3});
  ASSERT_TRUE(decode_call(valid, 0));
  auto with = [&](std::size_t at, std::uint8_t value) {
    EncodedCall copy = valid;
    copy[at] = std::byte{value};
    return decode_call(copy, 0);
  };
  EXPECT_FALSE(with(0, 0));     // no kind 0
  EXPECT_FALSE(with(0, 12));    // past scatter
  EXPECT_FALSE(with(1, 4));     // reduce op
  EXPECT_FALSE(with(2, 0xee));  // dtype
  EXPECT_FALSE(with(6, 0x41));  // root beyond any group
  EXPECT_TRUE(with(14, 0xff));  // any count is a count
}

}  // namespace
}  // namespace rlx
