// The 80-byte header at the front of every eager SEND and every ring chunk
// (an RDMA WRITE_WITH_IMM into the peer's registered ring).
//
// It wraps the TCP transport's frame header (rlx/transport/frame.h: kind,
// tag or step, sequence, length, the collective call), so a message means the
// same on both transports, and adds what RDMA needs: which stream, the
// chunk's offset in its message, and the sender's cumulative credits.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "rlx/transport/frame.h"

namespace rlx::verbs {

// Point-to-point messages and collective steps flow independently, each with
// its own ring slots, so neither can hold the other up.
enum class Stream : std::uint8_t { p2p = 0, collective = 1 };
inline constexpr int kStreams = 2;

enum class PacketType : std::uint8_t {
  frame = 1,   // a frame (message, collective step, abort, close) or a chunk of one
  credit = 2,  // only the credits: returns receive buffers and ring slots
};

// Counts only grow, so a late or repeated update can never add credit twice.
struct Credits {
  std::uint64_t recv = 0;                      // receive buffers reposted for the reader
  std::array<std::uint64_t, kStreams> ring{};  // ring slots freed, per stream
};

struct PacketHeader {
  PacketType type = PacketType::frame;
  Stream stream = Stream::p2p;
  wire::FrameHeader frame;
  std::uint64_t offset = 0;  // of this chunk's payload within the frame's message
  Credits credits;
};

inline constexpr std::size_t kPacketHeaderBytes = 80;

void encode_packet(const PacketHeader& header, std::span<std::byte, kPacketHeaderBytes> out);
// Throws wire::DecodeError when the bytes are not a valid header.
PacketHeader decode_packet(std::span<const std::byte, kPacketHeaderBytes> bytes);

}  // namespace rlx::verbs
