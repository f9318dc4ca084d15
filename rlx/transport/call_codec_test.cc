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

// Shared memory compares the bytes of two calls before decoding them, so
// the layout is fixed: kind, op, dtype, root + 1 (u32), count (u64), LE.
TEST(CallCodec, TheLayoutIsFixedLittleEndian) {
  const EncodedCall bytes = encode_call({.kind = CollectiveKind::reduce,
                                         .op = ReduceOp::max,
                                         .dtype = Dtype::f32,
                                         .count = 0x0102030405060708,
                                         .root = 0x0a0b0c0c});
  const EncodedCall want{std::byte(static_cast<int>(CollectiveKind::reduce)),
                         std::byte(static_cast<int>(ReduceOp::max)),
                         std::byte(static_cast<int>(Dtype::f32)),
                         std::byte{0x0d},
                         std::byte{0x0c},
                         std::byte{0x0b},
                         std::byte{0x0a},
                         std::byte{0x08},
                         std::byte{0x07},
                         std::byte{0x06},
                         std::byte{0x05},
                         std::byte{0x04},
                         std::byte{0x03},
                         std::byte{0x02},
                         std::byte{0x01}};
  EXPECT_EQ(bytes, want);
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
