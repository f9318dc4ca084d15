#include "rlx/backends/verbs/packet.h"

#include <gtest/gtest.h>

#include "rlx/transport/wire.h"

namespace rlx::verbs {
namespace {

TEST(Packet, RoundTripsEveryField) {
  PacketHeader h;
  h.type = PacketType::frame;
  h.stream = Stream::collective;
  h.frame = wire::collective_header(
      {CollectiveKind::all_reduce, ReduceOp::max, Dtype::f16, 1000, 42, -1}, 3, 2000);
  h.offset = 262016;
  h.credits = {17, {5, 9}};
  std::array<std::byte, kPacketHeaderBytes> bytes;
  encode_packet(h, bytes);
  const PacketHeader back = decode_packet(bytes);
  EXPECT_EQ(back.type, h.type);
  EXPECT_EQ(back.stream, h.stream);
  EXPECT_EQ(wire::call_of(back.frame), wire::call_of(h.frame));
  EXPECT_EQ(back.frame.tag, 3u);
  EXPECT_EQ(back.frame.length, 2000u);
  EXPECT_EQ(back.offset, h.offset);
  EXPECT_EQ(back.credits.recv, 17u);
  EXPECT_EQ(back.credits.ring[1], 9u);
}

TEST(Packet, RejectsGarbageBeforeUsingIt) {
  std::array<std::byte, kPacketHeaderBytes> bytes{};
  EXPECT_THROW(decode_packet(bytes), wire::DecodeError);
  PacketHeader h;
  encode_packet(h, bytes);
  bytes[wire::kFrameHeaderBytes + 5] = std::byte{7};  // an unknown stream
  EXPECT_THROW(decode_packet(bytes), wire::DecodeError);
}

}  // namespace
}  // namespace rlx::verbs
