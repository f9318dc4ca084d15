#include <algorithm>

#include "rlx/backends/verbs/engine_internal.h"

namespace rlx::verbs {

void Engine::send_message(int to, Tag tag, std::span<const std::byte> payload) {
  Caller caller(*this);
  latch_.rethrow_if_tripped();
  Peer& p = peer(to, "send_bytes");
  // Built only for an error: formatting costs more than a small send.
  auto sizes = [&] { return "tag " + std::to_string(tag) + ", " + format_bytes(payload.size()); };
  const Deadline deadline = coarse_now() + spec_.timeout;
  auto timed_out = [&](const std::string& what) {
    fail_and_throw(
        CollectiveError(ErrorKind::timeout, site("send_bytes", to, sizes()),
                        what + " within " + std::to_string(spec_.timeout.count()) + " ms",
                        "is rank " + std::to_string(to) +
                            " stopped or hung, or busy without taking messages? (RLX_TIMEOUT_S "
                            "sets the deadline)"),
        true);
  };
  if (!drive(caller, deadline, true, [&] { return !p.p2p.sending; })) {
    timed_out("another send to this rank did not finish");
  }
  p.p2p.sending = true;
  struct Release {
    bool& flag;
    ~Release() { flag = false; }
  } release{p.p2p.sending};
  const wire::FrameHeader frame{.kind = wire::FrameKind::message,
                                .tag = tag,
                                .sequence = p.p2p.send_sequence++,
                                .length = payload.size()};
  if (payload.size() <= kEagerPayload) {
    if (!drive(caller, deadline, true, [&] { return can_post_eager(p, false); })) {
      timed_out("rank " + std::to_string(to) + " freed no receive buffer");
    }
    post_eager(p, PacketType::frame, frame, payload, false);
    latch_.rethrow_if_tripped();
    return;
  }
  std::size_t offset = 0;
  const bool done = drive(caller, deadline, true, [&] {
    while (offset < payload.size() && can_post_chunk(p, Stream::p2p)) {
      const std::size_t n = std::min(kChunkPayload, payload.size() - offset);
      post_chunk(p, Stream::p2p, frame, offset, payload.subspan(offset, n));
      offset += n;
    }
    if (p.closed) {
      fail(CollectiveError(ErrorKind::peer_lost, site("send_bytes", to, sizes()),
                           "rank " + std::to_string(to) + " has shut down its transport"),
           false);
    }
    return offset == payload.size();
  });
  if (!done) {
    timed_out("rank " + std::to_string(to) + " took only " + format_bytes(offset) + " of " +
              format_bytes(payload.size()));
  }
}

void Engine::deliver_to_self(Tag tag, std::span<const std::byte> payload) {
  std::lock_guard lock(mutex_);
  ++mailbox_events_;
  if (!mailbox_.deliver(spec_.rank, tag, {payload.begin(), payload.end()},
                        mailbox_.awaited(spec_.rank, tag))) {
    throw CollectiveError(ErrorKind::resource_exhausted,
                          site("send_bytes", spec_.rank, format_bytes(payload.size())),
                          "messages to self not yet received exceed RLX_UNEXPECTED_BYTES");
  }
  progressed_.notify_all();
}

std::vector<std::byte> Engine::receive_message(int from, Tag tag) {
  Caller caller(*this);
  // No latch check: messages that arrived before a failure are still
  // delivered; the mailbox throws the failure once they are taken.
  if (auto queued = mailbox_.try_take(from, tag)) return std::move(*queued);
  // Nothing queued: the next such message is this caller's, and skips the
  // mailbox (one receiver per peer at a time; others take the mailbox's
  // way). The mailbox is only searched again when it changed.
  Peer::Waiter waiter{tag, std::nullopt};
  Peer& p = *peers_[static_cast<std::size_t>(from)];
  if (p.p2p.waiter == nullptr) p.p2p.waiter = &waiter;
  struct Unregister {
    Peer& peer;
    Peer::Waiter* mine;
    ~Unregister() {
      if (peer.p2p.waiter == mine) peer.p2p.waiter = nullptr;
    }
  } unregister{p, &waiter};
  std::optional<std::vector<std::byte>> message;
  std::uint64_t seen = mailbox_events_;
  const bool got = drive(caller, coarse_now() + spec_.timeout, false, [&] {
    if (waiter.message) {
      message = std::move(waiter.message);
      return true;
    }
    if (seen == mailbox_events_) return false;
    seen = mailbox_events_;
    message = mailbox_.try_take(from, tag);
    return message.has_value();
  });
  if (got) return std::move(*message);
  throw CollectiveError(
      ErrorKind::timeout, site("recv_bytes", from, "tag " + std::to_string(tag)),
      "no message arrived within " + std::to_string(spec_.timeout.count()) + " ms",
      "does rank " + std::to_string(from) + " send with this tag?");
}

}  // namespace rlx::verbs
