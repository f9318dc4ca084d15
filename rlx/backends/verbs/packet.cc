#include "rlx/backends/verbs/packet.h"

#include <algorithm>
#include <string>

#include "rlx/transport/wire.h"

namespace rlx::verbs {
namespace {

constexpr std::uint32_t kPacketMagic = 0x56584c52;  // "RLXV"

}  // namespace

namespace {

// Little-endian stores straight into the header (this runs for every chunk
// and every small message).
std::byte* put(std::byte* at, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) *at++ = static_cast<std::byte>(value >> (8 * i));
  return at;
}

}  // namespace

void encode_packet(const PacketHeader& h, std::span<std::byte, kPacketHeaderBytes> out) {
  const auto frame = wire::encode(h.frame);
  std::copy(frame.begin(), frame.end(), out.begin());
  std::byte* at = out.data() + wire::kFrameHeaderBytes;
  at = put(at, kPacketMagic, 4);
  at = put(at, static_cast<std::uint8_t>(h.type), 1);
  at = put(at, static_cast<std::uint8_t>(h.stream), 1);
  at = put(at, 0, 2);
  at = put(at, h.offset, 8);
  at = put(at, h.credits.recv, 8);
  for (auto ring : h.credits.ring) at = put(at, ring, 8);
}

PacketHeader decode_packet(std::span<const std::byte, kPacketHeaderBytes> bytes) {
  PacketHeader h;
  h.frame = wire::decode(bytes.first<wire::kFrameHeaderBytes>());
  wire::ByteReader r(bytes.subspan(wire::kFrameHeaderBytes));
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
