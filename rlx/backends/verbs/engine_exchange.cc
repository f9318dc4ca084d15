#include <algorithm>

#include "rlx/backends/verbs/engine_internal.h"

namespace rlx::verbs {

void Engine::progress_sends() {
  for (auto& s : sends_) {
    Peer& p = *s.peer;
    while ((!s.started || s.offset < s.payload.size()) && can_post_chunk(p, Stream::collective)) {
      const std::size_t n = std::min(kChunkPayload, s.payload.size() - s.offset);
      post_chunk(p, Stream::collective, s.frame, s.offset, s.payload.subspan(s.offset, n));
      s.offset += n;
      s.started = true;
    }
  }
}

std::string Engine::pending_description() const {
  std::string pending;
  for (const auto& owned : peers_) {
    const auto& e = owned->expect;
    if (e.active) {
      pending += (pending.empty() ? "" : "; ") + std::string("waiting for rank ") +
                 std::to_string(owned->rank) + " (" + format_bytes(e.got) + " of " +
                 format_bytes(e.into.size()) + " received)";
    }
  }
  for (const auto& s : sends_) {
    if (!s.started || s.offset < s.payload.size()) {
      pending += (pending.empty() ? "" : "; ") + std::string("sending to rank ") +
                 std::to_string(s.peer->rank) + " (" + format_bytes(s.offset) + " of " +
                 format_bytes(s.payload.size()) + " sent)";
    }
  }
  return pending;
}

void Engine::exchange(const CollectiveCall& call, std::uint32_t step,
                      std::span<const StepSend> sends, std::span<const StepRecv> recvs) {
  Caller caller(*this);
  // No latch check here: drive() lets data on hand finish the step first.
  // Errors name the call; describing it costs more than a small step, so
  // only a failing step does. A peer that closed after sending its part
  // can still be received from; sending to it is an error.
  auto link = [&](int rank, int lane, bool sending) -> Peer& {
    if (rank == spec_.rank || rank < 0 || rank >= spec_.world_size || lane != 0) {
      throw CollectiveError(ErrorKind::invalid_argument, site(call.describe(), rank),
                            "the algorithm asked for a link that does not exist");
    }
    Peer& p = *peers_[static_cast<std::size_t>(rank)];
    if (!p.ready || (sending && p.closed)) {
      latch_.rethrow_if_tripped();  // a failure that a peer passed on before its close
      peer(rank, call.describe());  // throws the reason
    }
    return p;
  };
  // The step's buffers are the caller's: however this call ends (a peer's
  // failure, the deadline), no chunk that arrives later may land in them.
  struct ForgetStep {
    Engine& engine;
    std::span<const StepRecv> recvs;
    ~ForgetStep() {
      engine.sends_.clear();
      for (const auto& r : recvs) {
        if (r.peer < 0 || r.peer >= engine.spec_.world_size) continue;
        if (auto& p = engine.peers_[static_cast<std::size_t>(r.peer)]) p->expect.active = false;
      }
    }
  } forget{*this, recvs};
  sends_.clear();
  for (const auto& s : sends) {
    sends_.push_back({&link(s.peer, s.lane, true),
                      wire::collective_header(call, step, s.bytes.size()), s.bytes, 0, false});
  }
  for (const auto& r : recvs) {
    Peer& p = link(r.peer, r.lane, false);
    p.expect = {true, false, call, step, r.into, r.reduce, 0};
    consume_held(p);
  }
  if (!current_call_ || !(*current_call_ == call)) {
    current_call_ = call;
    for (const auto& p : peers_) {
      if (auto mismatch = p ? unawaited_mismatch(*p) : std::nullopt) {
        fail_and_throw(*mismatch, true);
      }
    }
  }
  flush_credits();
  const bool done = drive(caller, coarse_now() + spec_.timeout, true, [&] {
    progress_sends();
    bool complete = true;
    for (const auto& s : sends_) complete = complete && s.started && s.offset == s.payload.size();
    for (const auto& r : recvs) {
      const Peer& p = *peers_[static_cast<std::size_t>(r.peer)];
      if (!p.expect.active) continue;
      complete = false;
      if (p.closed) {
        fail(CollectiveError(ErrorKind::peer_lost, site(call.describe(), r.peer),
                             "rank " + std::to_string(r.peer) +
                                 " shut down its transport during step " + std::to_string(step)),
             true);
      }
    }
    return complete;
  });
  if (!done) {
    fail_and_throw(
        CollectiveError(ErrorKind::timeout, site(call.describe()),
                        "step " + std::to_string(step) + " did not complete within " +
                            std::to_string(spec_.timeout.count()) + " ms: " + pending_description(),
                        "a rank that never reached this collective, or a network that stopped "
                        "delivering (RLX_TIMEOUT_S sets the deadline)"),
        true);
  }
}

}  // namespace rlx::verbs
