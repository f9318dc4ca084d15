// The fixed 40-byte header in front of every message on an established TCP
// connection (and inside every verbs packet): magic, kind, the call
// (call_codec.h), tag, sequence, length. Decoding validates everything
// before a single payload byte is read or allocated.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "rlx/transport/collective_call.h"
#include "rlx/transport/errors.h"

namespace rlx::wire {

enum class FrameKind : std::uint8_t {
  message = 1,     // send_bytes payload (p2p connection)
  collective = 2,  // one step of a collective (lane connections)
  abort = 3,       // the sender failed; the payload is its error message (p2p)
  close = 4,       // the sender is shutting down cleanly (p2p)
  ping = 5,        // "do you still run?", from a rank whose collective timed out (p2p)
  pong = 6,        // the answer, sent by the progress thread (p2p)
};

struct FrameHeader {
  FrameKind kind = FrameKind::message;
  std::uint32_t tag = 0;       // message: user tag; collective: step; abort: ErrorKind
  std::uint64_t sequence = 0;  // message: per-connection count; collective: call number;
                               // abort: 1 + the rank the failure is blamed on (0: none)
  std::uint64_t length = 0;    // payload bytes that follow
  // Collective frames only: what the sender is doing.
  CollectiveKind collective = CollectiveKind::barrier;
  ReduceOp op = ReduceOp::sum;
  Dtype dtype = Dtype::u8;
  std::uint64_t count = 0;
  std::int32_t root = -1;  // broadcast's root
};

inline constexpr std::size_t kFrameHeaderBytes = 40;
inline constexpr std::uint32_t kFrameMagic = 0x46584c52;  // "RLXF"
using EncodedHeader = std::array<std::byte, kFrameHeaderBytes>;

EncodedHeader encode(const FrameHeader& header);

// Throws wire::DecodeError when the bytes are not a valid header (bad magic,
// unknown kind, collective or dtype, non-zero reserved bits).
FrameHeader decode(std::span<const std::byte, kFrameHeaderBytes> bytes);

// The header of a collective step.
FrameHeader collective_header(const CollectiveCall& call, std::uint32_t step, std::uint64_t length);

// The call a collective header announces.
CollectiveCall call_of(const FrameHeader& header);

// An abort's text is cut to this length: it fits one eager verbs packet, and
// a receiver refuses a longer one as a protocol violation.
inline constexpr std::size_t kMaxAbortTextBytes = 4000;

// The header of the abort that passes `error` on to the other ranks,
// blaming the rank the error names (its peer, else `self`, the sender).
FrameHeader abort_header(const CollectiveError& error, int self, std::uint64_t length);

// What a received abort stands for: `sender` failed with `text`. The error
// is blamed (site.peer, CollectiveError::peer) on the rank the header names
// when it is a rank of the group (site.world_size) other than this one
// (site.rank), else on `sender`, so a failure relayed from rank to rank
// still names its cause, and the rank blamed names the rank that found it.
CollectiveError relayed_failure(const FrameHeader& header, std::string_view text, int sender,
                                ErrorSite site);

}  // namespace rlx::wire
