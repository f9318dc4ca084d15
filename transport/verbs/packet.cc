#include "transport/verbs/packet.h"

#include <algorithm>
#include <string>

#include "transport/wire.h"

namespace rlx::verbs {
namespace {

constexpr std::uint32_t kPacketMagic = 0x56584c52;  // "RLXV"

}  // namespace

void encode_packet(const PacketHeader& h, std::span<std::byte, kPacketHeaderBytes> out) {
  const auto frame = tcp::encode(h.frame);
  wire::ByteWriter w;
  w.u32(kPacketMagic);
  w.u8(static_cast<std::uint8_t>(h.type));
  w.u8(static_cast<std::uint8_t>(h.stream));
  w.u16(0);
  w.u64(h.offset);
  w.u64(h.credits.recv);
  for (auto ring : h.credits.ring) w.u64(ring);
  std::copy(frame.begin(), frame.end(), out.begin());
  std::copy(w.bytes().begin(), w.bytes().end(), out.begin() + tcp::kFrameHeaderBytes);
}

PacketHeader decode_packet(std::span<const std::byte, kPacketHeaderBytes> bytes) {
  PacketHeader h;
  h.frame = tcp::decode(bytes.first<tcp::kFrameHeaderBytes>());
  wire::ByteReader r(bytes.subspan(tcp::kFrameHeaderBytes));
  if (r.u32() != kPacketMagic) throw wire::DecodeError("bad packet magic (not an rlx peer)");
  const std::uint8_t type = r.u8(), stream = r.u8();
  if (type < 1 || type > 2) throw wire::DecodeError("unknown packet type " + std::to_string(type));
  if (stream >= kStreams) throw wire::DecodeError("unknown stream " + std::to_string(stream));
  if (r.u16() != 0) throw wire::DecodeError("reserved bits set in a packet header");
  h.type = static_cast<PacketType>(type);
  h.stream = static_cast<Stream>(stream);
  h.offset = r.u64();
  h.credits.recv = r.u64();
  for (auto& ring : h.credits.ring) ring = r.u64();
  return h;
}

}  // namespace rlx::verbs
