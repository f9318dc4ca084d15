#include "transport/frame.h"

#include <gtest/gtest.h>

#include "transport/wire.h"

namespace rlx::wire {
namespace {

TEST(Frame, CollectiveHeaderRoundTrips) {
  CollectiveCall call{CollectiveKind::broadcast, ReduceOp::max, Dtype::bf16, 123456789, 42, 3};
  const auto bytes = encode(collective_header(call, 7, 999));
  const FrameHeader h = decode(bytes);
  EXPECT_EQ(h.kind, FrameKind::collective);
  EXPECT_EQ(h.tag, 7u);
  EXPECT_EQ(h.length, 999u);
  EXPECT_EQ(call_of(h), call);
}

TEST(Frame, MessageHeaderRoundTripsHugeLengths) {
  const auto bytes = encode({.kind = FrameKind::message,
                             .tag = kMaxTag,
                             .sequence = ~0ull,
                             .length = std::uint64_t{1} << 63});
  const FrameHeader h = decode(bytes);
  EXPECT_EQ(h.tag, kMaxTag);
  EXPECT_EQ(h.sequence, ~0ull);
  EXPECT_EQ(h.length, std::uint64_t{1} << 63);
}

TEST(Frame, RejectsGarbageBeforeTrustingAnyField) {
  EncodedHeader bytes = encode({.kind = FrameKind::message});
  auto corrupt = [&](std::size_t at, std::uint8_t value) {
    EncodedHeader copy = bytes;
    copy[at] = std::byte{value};
    return copy;
  };
  EXPECT_THROW(decode(corrupt(0, 'X')), wire::DecodeError);    // magic
  EXPECT_THROW(decode(corrupt(4, 9)), wire::DecodeError);      // kind
  EXPECT_THROW(decode(corrupt(5, 0)), wire::DecodeError);      // collective kind
  EXPECT_THROW(decode(corrupt(6, 4)), wire::DecodeError);      // reduce op
  EXPECT_THROW(decode(corrupt(7, 8)), wire::DecodeError);      // dtype
  EXPECT_THROW(decode(corrupt(15, 0xff)), wire::DecodeError);  // root
}

}  // namespace
}  // namespace rlx::wire
