#include <algorithm>
#include <cstring>

#include "rlx/backends/verbs/engine_internal.h"

namespace rlx::verbs {

void Engine::apply_credits(Peer& p, const Credits& credits) {
  p.posting.recv_credit = std::max(p.posting.recv_credit, credits.recv);
  for (std::size_t s = 0; s < kStreams; ++s) {
    p.posting.ring_credit[s] = std::max(p.posting.ring_credit[s], credits.ring[s]);
  }
}

Credits Engine::take_credits(Peer& p) {
  Credits c{p.owed.recv_reposted, p.owed.ring_freed};
  p.owed.recv_reported = p.owed.recv_reposted;
  p.owed.ring_reported = p.owed.ring_freed;
  return c;
}

void Engine::flush_credits() {
  for (auto& owned : peers_) {
    Peer& p = *owned;
    if (!p.ready || p.closed) continue;
    const bool owe_ring = p.owed.ring_freed[0] != p.owed.ring_reported[0] ||
                          p.owed.ring_freed[1] != p.owed.ring_reported[1];
    if (!owe_ring && p.owed.recv_reposted - p.owed.recv_reported < kRecvCreditBatch) continue;
    if (can_post_eager(p, true)) post_eager(p, PacketType::credit, {}, {}, true);
  }
}

bool Engine::can_post_eager(const Peer& p, bool control) const {
  if (p.free_send.empty() || p.sq_outstanding >= p.shape.send_depth) return false;
  return control || p.send_credits() > 0;
}

bool Engine::can_post_chunk(const Peer& p, Stream stream) const {
  const auto s = static_cast<std::size_t>(stream);
  return p.send_credits() > 0 && p.ring_credits(stream) > 0 &&
         !p.staging_busy[s][p.posting.ring_next[s]] && p.sq_outstanding < p.shape.send_depth;
}

bool Engine::post_eager(Peer& p, PacketType type, const wire::FrameHeader& frame,
                        std::span<const std::byte> payload, bool control) {
  const std::uint32_t index = p.free_send.back();
  std::byte* buffer = p.send_buffer(index);
  PacketHeader h{type, Stream::p2p, frame, 0, take_credits(p)};
  h.frame.length = payload.size();
  encode_packet(h, std::span<std::byte, kPacketHeaderBytes>(buffer, kPacketHeaderBytes));
  if (!payload.empty()) std::memcpy(buffer + kPacketHeaderBytes, payload.data(), payload.size());
  const auto total = static_cast<std::uint32_t>(kPacketHeaderBytes + payload.size());
  const int rc =
      post_send(p.qp, encode_work_id({WorkKind::send, static_cast<std::uint32_t>(p.rank), index}),
                buffer, total, local_->lkey(), total <= p.shape.max_inline);
  if (rc != 0) {
    if (!control) {
      fail(CollectiveError(ErrorKind::peer_lost, site("SEND", p.rank, format_bytes(total)),
                           std::string("ibv_post_send failed: ") + std::strerror(rc)),
           true);
    }
    return false;
  }
  p.free_send.pop_back();
  p.send_length[index] = total;
  ++p.sq_outstanding;
  if (!control) ++p.posting.data_posted;
  return true;
}

void Engine::post_chunk(Peer& p, Stream stream, const wire::FrameHeader& frame,
                        std::uint64_t offset, std::span<const std::byte> payload) {
  const auto s = static_cast<std::size_t>(stream);
  const std::uint32_t slot = p.posting.ring_next[s];
  std::byte* staging = p.staging_slot(stream, slot);
  const PacketHeader h{PacketType::frame, stream, frame, offset, take_credits(p)};
  encode_packet(h, std::span<std::byte, kPacketHeaderBytes>(staging, kPacketHeaderBytes));
  if (!payload.empty()) std::memcpy(staging + kPacketHeaderBytes, payload.data(), payload.size());
  const auto total = static_cast<std::uint32_t>(kPacketHeaderBytes + payload.size());
  const std::uint32_t imm = (static_cast<std::uint32_t>(s) << 16) | slot;
  const int rc = post_write_with_imm(
      p.qp, encode_work_id({WorkKind::write, static_cast<std::uint32_t>(p.rank), imm}), staging,
      total, local_->lkey(), p.remote.address + slot_index(stream, slot) * kSlotBytes,
      p.remote.rkey, imm, total <= p.shape.max_inline);
  if (rc != 0) {
    fail_and_throw(CollectiveError(ErrorKind::peer_lost,
                                   site("RDMA WRITE_WITH_IMM", p.rank, format_bytes(total)),
                                   std::string("ibv_post_send failed: ") + std::strerror(rc)),
                   true);
  }
  p.staging_busy[s][slot] = true;
  p.posting.ring_next[s] = (slot + 1) % kSlots[s];
  ++p.posting.ring_posted[s];
  ++p.posting.data_posted;
  ++p.sq_outstanding;
}

}  // namespace rlx::verbs
