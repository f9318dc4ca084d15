#include <algorithm>
#include <cstring>

#include <arpa/inet.h>

#include "rlx/backends/verbs/engine_internal.h"
#include "rlx/collectives/reduce.h"
#include "rlx/transport/frame_mismatch.h"
#include "rlx/transport/wire.h"

namespace rlx::verbs {

void Engine::repost(Peer& p, std::uint32_t index) {
  if (p.qp == nullptr) return;
  const int rc =
      post_recv(p.qp, encode_work_id({WorkKind::recv, static_cast<std::uint32_t>(p.rank), index}),
                p.recv_buffer(index), kEagerBytes, local_->lkey());
  if (rc != 0 && !latch_.tripped() && !closing_) {
    fail(CollectiveError(ErrorKind::peer_lost, site("RECV", p.rank),
                         std::string("ibv_post_recv failed: ") + std::strerror(rc)),
         true);
  }
}

void Engine::on_recv(Peer& p, const ibv_wc& wc, std::uint32_t index) {
  if (wc.status != IBV_WC_SUCCESS) return completion_failed(p, wc.wr_id >> 56, wc, 0);
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    repost(p, index);
    ++p.owed.recv_reposted;
    return on_chunk(p, ntohl(wc.imm_data), wc.byte_len);
  }
  on_eager(p, wc, index);
}

void Engine::violation(Peer& p, const std::string& what) {
  fail(CollectiveError(ErrorKind::protocol_violation, site("receive", p.rank),
                       "from rank " + std::to_string(p.rank) + ": " + what),
       true);
}

void Engine::on_eager(Peer& p, const ibv_wc& wc, std::uint32_t index) {
  const std::byte* buffer = p.recv_buffer(index);
  if (wc.byte_len < kPacketHeaderBytes || wc.byte_len > kEagerBytes) {
    repost(p, index);
    return violation(p, "a " + std::to_string(wc.byte_len) + "-byte SEND");
  }
  PacketHeader h;
  try {
    h = decode_packet(std::span<const std::byte, kPacketHeaderBytes>(buffer, kPacketHeaderBytes));
  } catch (const wire::DecodeError& error) {
    repost(p, index);
    return violation(p, error.what());
  }
  apply_credits(p, h.credits);
  const std::size_t bytes = wc.byte_len - kPacketHeaderBytes;
  if (h.type == PacketType::credit) return repost(p, index);
  switch (h.frame.kind) {
    case wire::FrameKind::message: {
      std::vector<std::byte> message(buffer + kPacketHeaderBytes,
                                     buffer + kPacketHeaderBytes + bytes);
      repost(p, index);
      ++p.owed.recv_reposted;
      if (h.frame.length != bytes || h.frame.tag > kMaxTag || h.frame.sequence != p.p2p.expected ||
          p.p2p.assembling) {
        return violation(p, "a malformed message (tag " + std::to_string(h.frame.tag) +
                                ", sequence " + std::to_string(h.frame.sequence) + ", expected " +
                                std::to_string(p.p2p.expected) + ")");
      }
      ++p.p2p.expected;
      return deliver(p, h.frame.tag, std::move(message));
    }
    case wire::FrameKind::abort: {
      const std::string text(reinterpret_cast<const char*>(buffer + kPacketHeaderBytes), bytes);
      repost(p, index);
      return fail(wire::relayed_failure(h.frame, text, p.rank, site("(remote failure)")), false);
    }
    case wire::FrameKind::close:
      repost(p, index);
      p.closed = true;
      ++mailbox_events_;
      mailbox_.fail(p.rank,
                    std::make_exception_ptr(peer_shut_down(site("recv_bytes", p.rank), p.rank)));
      return;
    case wire::FrameKind::collective:
      repost(p, index);
      return violation(p, "a collective step arrived as a SEND");
    case wire::FrameKind::ping:
    case wire::FrameKind::pong:
      repost(p, index);
      return violation(p, "a liveness probe, which only TCP's point-to-point connection carries");
  }
}

void Engine::on_chunk(Peer& p, std::uint32_t imm, std::uint32_t bytes) {
  const std::uint32_t stream_index = imm >> 16, slot = imm & 0xffff;
  if (stream_index >= kStreams || slot != p.owed.ring_expect[stream_index]) {
    return violation(p, "a ring write to stream " + std::to_string(stream_index) + " slot " +
                            std::to_string(slot) + " out of order");
  }
  const auto stream = static_cast<Stream>(stream_index);
  p.owed.ring_expect[stream_index] = (slot + 1) % kSlots[stream_index];
  if (bytes < kPacketHeaderBytes || bytes > kSlotBytes) {
    return violation(p, "a " + std::to_string(bytes) + "-byte ring write");
  }
  const std::byte* base = p.ring_slot(stream, slot);
  PacketHeader h;
  try {
    h = decode_packet(std::span<const std::byte, kPacketHeaderBytes>(base, kPacketHeaderBytes));
  } catch (const wire::DecodeError& error) {
    return violation(p, error.what());
  }
  apply_credits(p, h.credits);
  if (h.stream != stream || h.type != PacketType::frame) {
    return violation(p, "a ring chunk whose header names another stream");
  }
  const std::uint32_t payload = bytes - static_cast<std::uint32_t>(kPacketHeaderBytes);
  if (stream == Stream::p2p) {
    on_p2p_chunk(p, h, base + kPacketHeaderBytes, payload);
    ++p.owed.ring_freed[0];
    return;
  }
  if (h.frame.kind != wire::FrameKind::collective) {
    return violation(p, "a non-collective frame on the collective stream");
  }
  p.held.chunks[(p.held.head + p.held.count) % kMaxSlots] = {slot, payload, h};
  ++p.held.count;
  consume_held(p);
  if (auto mismatch = unawaited_mismatch(p)) fail(*mismatch, true);
}

std::optional<CollectiveError> Engine::unawaited_mismatch(const Peer& p) const {
  if (!current_call_ || p.expect.active || p.held.count == 0) return std::nullopt;
  const Held& c = p.held.chunks[p.held.head];
  if (c.header.offset != 0) return std::nullopt;
  return wire::other_call(site(current_call_->describe()), *current_call_, p.rank, c.header.frame);
}

void Engine::on_p2p_chunk(Peer& p, const PacketHeader& h, const std::byte* data,
                          std::size_t bytes) {
  if (h.frame.kind != wire::FrameKind::message) {
    return violation(p, "a non-message frame on the message stream");
  }
  if (h.offset == 0) {
    if (p.p2p.assembling || h.frame.tag > kMaxTag || h.frame.sequence != p.p2p.expected) {
      return violation(p, "a message (tag " + std::to_string(h.frame.tag) + ", sequence " +
                              std::to_string(h.frame.sequence) + ") out of order");
    }
    ++p.p2p.expected;
    // A receiver already waiting takes a message of any length; only bytes
    // held for nobody count against the cap.
    const bool awaited = (p.p2p.waiter != nullptr && p.p2p.waiter->tag == h.frame.tag) ||
                         mailbox_.awaited(p.rank, h.frame.tag);
    if (!awaited && h.frame.length > mailbox_.byte_cap()) {
      return fail(CollectiveError(ErrorKind::resource_exhausted, site("receive", p.rank),
                                  "rank " + std::to_string(p.rank) + " sent a " +
                                      format_bytes(h.frame.length) + " message (tag " +
                                      std::to_string(h.frame.tag) +
                                      ") that no recv_bytes waited for; at most "
                                      "RLX_UNEXPECTED_BYTES = " +
                                      format_bytes(mailbox_.byte_cap()) + " can be held for later"),
                  true);
    }
    p.p2p.assembling = true;
    p.p2p.assembly_awaited = awaited;
    p.p2p.assembly_frame = h.frame;
    p.p2p.assembly.resize(h.frame.length);
    p.p2p.assembled = 0;
  } else if (!p.p2p.assembling || h.offset != p.p2p.assembled ||
             h.frame.sequence != p.p2p.assembly_frame.sequence) {
    return violation(p, "a message chunk at offset " + std::to_string(h.offset) + " out of order");
  }
  if (bytes > p.p2p.assembly.size() - p.p2p.assembled) {
    return violation(p, "a message chunk beyond the message's length");
  }
  std::memcpy(p.p2p.assembly.data() + p.p2p.assembled, data, bytes);
  p.p2p.assembled += bytes;
  if (p.p2p.assembled == p.p2p.assembly.size()) {
    p.p2p.assembling = false;
    deliver(p, p.p2p.assembly_frame.tag, std::move(p.p2p.assembly), p.p2p.assembly_awaited);
    p.p2p.assembly = {};
  }
}

void Engine::deliver(Peer& p, Tag tag, std::vector<std::byte> message, bool awaited) {
  ++mailbox_events_;
  if (p.p2p.waiter != nullptr && p.p2p.waiter->tag == tag) {
    p.p2p.waiter->message = std::move(message);
    p.p2p.waiter = nullptr;
    return;
  }
  if (!mailbox_.deliver(p.rank, tag, std::move(message), awaited)) {
    fail(CollectiveError(ErrorKind::resource_exhausted, site("receive", p.rank),
                         "messages received but not yet passed to recv_bytes exceed "
                         "RLX_UNEXPECTED_BYTES = " +
                             format_bytes(mailbox_.byte_cap())),
         true);
  }
}

void Engine::consume_held(Peer& p) {
  auto& e = p.expect;
  // Also after a failure elsewhere: what arrived before it still counts. A
  // bad chunk stays at the head, so it is never consumed past.
  while (p.held.count > 0 && e.active) {
    const Held& c = p.held.chunks[p.held.head];
    if (c.header.offset == 0) {
      if (e.started) return violation(p, "a collective step began before the last one ended");
      if (auto mismatch = wire::step_mismatch(site(e.call.describe()), e.call, e.step,
                                              e.into.size(), p.rank, c.header.frame)) {
        return fail(*mismatch, true);
      }
      e.started = true;
    } else if (!e.started || c.header.offset != e.got) {
      return violation(
          p, "a collective chunk at offset " + std::to_string(c.header.offset) + " out of order");
    }
    if (c.bytes > e.into.size() - e.got) {
      return violation(p, "a collective chunk beyond its step's length");
    }
    const std::byte* data = p.ring_slot(Stream::collective, c.slot) + kPacketHeaderBytes;
    if (c.bytes > 0) {
      if (e.reduce) {
        const std::size_t count = c.bytes / size_of(e.call.dtype);
        reduce_into({e.into.data() + e.got, count, e.call.dtype}, {data, count, e.call.dtype},
                    e.call.op);
      } else {
        std::memcpy(e.into.data() + e.got, data, c.bytes);
      }
    }
    e.got += c.bytes;
    p.held.head = (p.held.head + 1) % kMaxSlots;
    --p.held.count;
    ++p.owed.ring_freed[1];
    if (e.got == e.into.size()) e.active = false;
  }
}

}  // namespace rlx::verbs
