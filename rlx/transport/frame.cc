#include "rlx/transport/frame.h"

#include <string>
#include <utility>

#include "rlx/transport/call_codec.h"
#include "rlx/transport/wire.h"

namespace rlx::wire {

static_assert(4 + 1 + kEncodedCallBytes + 4 + 8 + 8 == kFrameHeaderBytes);

EncodedHeader encode(const FrameHeader& h) {
  EncodedHeader out;
  wire::SpanWriter w(out);
  w.u32(kFrameMagic);
  w.u8(static_cast<std::uint8_t>(h.kind));
  w.raw(encode_call(call_of(h)));
  w.u32(h.tag);
  w.u64(h.sequence);
  w.u64(h.length);
  return out;
}

FrameHeader decode(std::span<const std::byte, kFrameHeaderBytes> bytes) {
  wire::ByteReader r(bytes);
  if (r.u32() != kFrameMagic) throw wire::DecodeError("bad frame magic (not an rlx stream)");
  const std::uint8_t kind = r.u8();
  if (kind < 1 || kind > 6) throw wire::DecodeError("unknown frame kind " + std::to_string(kind));
  const auto call = decode_call(r.raw(kEncodedCallBytes).first<kEncodedCallBytes>(), 0);
  if (!call) throw wire::DecodeError("invalid collective descriptor in frame header");
  FrameHeader h = collective_header(*call, r.u32(), 0);
  h.kind = static_cast<FrameKind>(kind);
  h.sequence = r.u64();
  h.length = r.u64();
  return h;
}

FrameHeader collective_header(const CollectiveCall& call, std::uint32_t step,
                              std::uint64_t length) {
  return {.kind = FrameKind::collective,
          .tag = step,
          .sequence = call.sequence,
          .length = length,
          .collective = call.kind,
          .op = call.op,
          .dtype = call.dtype,
          .count = call.count,
          .root = call.root};
}

CollectiveCall call_of(const FrameHeader& h) {
  return {h.collective, h.op, h.dtype, h.count, h.sequence, h.root};
}

FrameHeader abort_header(const CollectiveError& error, int self, std::uint64_t length) {
  const int blamed = error.peer() >= 0 ? error.peer() : self;
  return {.kind = FrameKind::abort,
          .tag = static_cast<std::uint32_t>(error.kind()),
          .sequence = static_cast<std::uint64_t>(blamed) + 1,
          .length = length};
}

CollectiveError relayed_failure(const FrameHeader& header, std::string_view text, int sender,
                                ErrorSite site) {
  const auto kind = header.tag <= static_cast<std::uint32_t>(ErrorKind::resource_exhausted)
                        ? static_cast<ErrorKind>(header.tag)
                        : ErrorKind::protocol_violation;
  const bool names_a_rank =
      header.sequence >= 1 && header.sequence <= static_cast<std::uint64_t>(site.world_size);
  const int blamed = names_a_rank ? static_cast<int>(header.sequence - 1) : sender;
  // The blamed rank itself (the other side of a mismatch) hears of it from its sender.
  site.peer = blamed == site.rank ? sender : blamed;
  return CollectiveError(kind, std::move(site),
                         "rank " + std::to_string(sender) + " failed: " + std::string(text));
}

}  // namespace rlx::wire
