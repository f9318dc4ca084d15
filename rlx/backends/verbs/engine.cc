#include <algorithm>
#include <cstring>

#include <sys/eventfd.h>
#include <unistd.h>

#include "rlx/backends/verbs/engine_internal.h"

namespace rlx::verbs {

Engine::Engine(Spec spec, Device& device, Mailbox& mailbox, FailureLatch& latch)
    : spec_(spec),
      caller_spin_(spec.caller_spin.bound),
      device_(device),
      mailbox_(mailbox),
      latch_(latch) {
  const auto n = static_cast<std::size_t>(spec_.world_size);
  const ErrorSite where = site("register memory");
  local_ = std::make_unique<RegisteredMemory>(
      device.pd(), n * kLocalPerPeer, IBV_ACCESS_LOCAL_WRITE, "eager and staging buffers", where);
  ring_ = std::make_unique<RegisteredMemory>(device.pd(), n * kRingPerPeer,
                                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                             "receive rings", where);
  for (std::size_t r = 0; r < n; ++r) {
    auto p = std::make_unique<Peer>();
    p->rank = static_cast<int>(r);
    std::byte* base = local_->data() + r * kLocalPerPeer;
    p->recv = base;
    p->send = p->recv + kRecvBuffers * kEagerBytes;
    p->staging = p->send + kSendBuffers * kEagerBytes;
    p->ring = ring_->data() + r * kRingPerPeer;
    for (std::uint32_t i = kSendBuffers; i-- > 0;) p->free_send.push_back(i);
    peers_.push_back(std::move(p));
  }
  sends_.reserve(64);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

Engine::~Engine() {
  stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

QueueShape Engine::queue_shape() { return {kSendDepth, kRecvDepth, 0}; }

int Engine::cq_entries(int world_size) {
  return (world_size - 1) * static_cast<int>(kSendDepth + kRecvDepth) + 2 * (world_size + 40);
}

ErrorSite Engine::site(std::string_view operation, int peer, std::string sizes) const {
  return {.rank = spec_.rank,
          .world_size = spec_.world_size,
          .peer = peer,
          .operation = std::string(operation),
          .sizes = std::move(sizes)};
}

RingInfo Engine::local_ring(int peer) const {
  const Peer& p = *peers_[static_cast<std::size_t>(peer)];
  return {reinterpret_cast<std::uintptr_t>(p.ring),
          ring_->rkey(),
          static_cast<std::uint32_t>(kSlotBytes),
          {static_cast<std::uint16_t>(kSlots[0]), static_cast<std::uint16_t>(kSlots[1])},
          kRecvCredits};
}

void Engine::post_receives(int peer, ibv_qp* qp) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  p.qp = qp;
  for (std::uint32_t i = 0; i < kRecvBuffers; ++i) repost(p, i);
}

void Engine::on_ready(const PeerLink& link) {
  Peer& p = *peers_[static_cast<std::size_t>(link.peer)];
  const RingInfo mine = local_ring(link.peer);
  if (link.remote.slot_bytes != mine.slot_bytes || link.remote.slots[0] != mine.slots[0] ||
      link.remote.slots[1] != mine.slots[1] || link.remote.recv_credits != mine.recv_credits) {
    fail(CollectiveError(ErrorKind::protocol_violation, site("connect", link.peer),
                         "rank " + std::to_string(link.peer) +
                             " uses another ring layout (a different rlx build)",
                         "run the same rlx build on every rank"),
         false);
    return;
  }
  p.qp = link.qp;
  p.shape = link.shape;
  p.remote = link.remote;
  p.ready = true;
}

void Engine::on_lost(int peer, const std::string& why) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (!p.ready || p.closed || closing_) return;
  poll_completions();  // a close sent just before the disconnect explains it
  if (p.closed || closing_) return;
  fail(CollectiveError(ErrorKind::peer_lost, site("receive", peer), why,
                       "rank " + std::to_string(peer) + "'s own output says why it stopped"),
       true);
}

void Engine::set_handshake_handler(std::function<void(const ibv_wc&)> handler) {
  handshake_ = std::move(handler);
}

void Engine::run_locked(const std::function<void()>& fn) {
  std::lock_guard lock(mutex_);
  fn();
  poll_completions();
}

Engine::Peer& Engine::peer(int rank, std::string_view operation) {
  Peer& p = *peers_[static_cast<std::size_t>(rank)];
  if (!p.ready) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation, rank),
                          "no connection to rank " + std::to_string(rank));
  }
  if (p.closed) {
    throw CollectiveError(ErrorKind::peer_lost, site(operation, rank),
                          "rank " + std::to_string(rank) + " has shut down its transport");
  }
  return p;
}

void Engine::fail(const CollectiveError& error, bool tell_peers) {
  if (!relay_.trip(error, !tell_peers)) return;
  ++mailbox_events_;
  progressed_.notify_all();
  if (tell_peers) relay_.tell_peers(error);
}

void Engine::post_to_peers(const wire::FrameHeader& header, std::span<const std::byte> payload) {
  for (auto& owned : peers_) {
    Peer& p = *owned;
    if (!p.ready || p.closed || !can_post_eager(p, true)) continue;
    post_eager(p, PacketType::frame, header, payload, true);
  }
}

void Engine::report_failure(const CollectiveError& error) {
  run_locked([&] { fail(error, true); });
}

void Engine::fail_and_throw(const CollectiveError& error, bool tell_peers) {
  fail(error, tell_peers);
  latch_.rethrow_if_tripped();
  throw error;
}

void Engine::close() {
  Caller caller(*this);
  closing_ = true;
  relay_.say_goodbye();
  // Wait briefly for the peers' own close, so none of them mistakes our
  // disconnect for a crash while it still finishes its last receives.
  try {
    drive(caller, coarse_now() + std::min<Clock::duration>(kLinger, spec_.timeout), false, [&] {
      if (latch_.tripped()) return true;
      for (const auto& owned : peers_) {
        if (owned->ready && !owned->closed) return false;
      }
      return true;
    });
  } catch (const CollectiveError&) {
    // Shutting down anyway.
  }
}

}  // namespace rlx::verbs
