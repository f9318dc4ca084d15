#include "rlx/transport/frame.h"

#include <gtest/gtest.h>

#include "rlx/transport/wire.h"

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
  EXPECT_THROW(decode(corrupt(11, 0xff)), wire::DecodeError);  // root
}

// An abort relayed from rank to rank stays blamed on the rank that caused
// it; a header naming no rank of the group blames its sender.
TEST(Frame, RelayedFailuresKeepTheRankTheyBlame) {
  const CollectiveError original(ErrorKind::peer_lost, {.rank = 0, .world_size = 3, .peer = 2},
                                 "rank 2 has shut down its transport");
  const FrameHeader header = decode(encode(abort_header(original, 0, 10)));
  EXPECT_EQ(header.kind, FrameKind::abort);
  const CollectiveError relayed =
      relayed_failure(header, original.what(), 0, {.rank = 1, .world_size = 3});
  EXPECT_EQ(relayed.kind(), ErrorKind::peer_lost);
  EXPECT_EQ(relayed.peer(), 2);
  EXPECT_NE(std::string(relayed.what()).find("rank 0 failed: "), std::string::npos);

  // Rank 2, the blamed rank itself, is told who found it.
  EXPECT_EQ(relayed_failure(header, original.what(), 0, {.rank = 2, .world_size = 3}).peer(), 0);

  const CollectiveError mine(ErrorKind::mismatch, {.rank = 1, .world_size = 3}, "different calls");
  EXPECT_EQ(relayed_failure(abort_header(mine, 1, 0), "", 1, {.world_size = 3}).peer(), 1);
  FrameHeader stranger = header;
  stranger.sequence = 99;
  stranger.tag = 200;
  const CollectiveError odd = relayed_failure(stranger, "", 0, {.world_size = 3});
  EXPECT_EQ(odd.peer(), 0);
  EXPECT_EQ(odd.kind(), ErrorKind::protocol_violation);
}

}  // namespace
}  // namespace rlx::wire
