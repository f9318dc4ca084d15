#include "rlx/transport/shm/point_to_point.h"

#include <cstring>
#include <functional>
#include <limits>

#include "rlx/transport/log.h"

namespace rlx::shm {

struct PointToPoint::Inbound {
  explicit Inbound(MessageRing r) : ring(r) {}
  std::mutex consumer;
  std::atomic<int> receiving{0};  // callers in recv(): the drainer keeps off
  std::atomic<int> parked{0};     // messages from this peer waiting in the mailbox
  MessageRing ring;
};

struct PointToPoint::Outbound {
  explicit Outbound(MessageRing r) : ring(r) {}
  std::mutex producer;
  MessageRing ring;
};

namespace {

std::string describe_message(Tag tag, std::size_t bytes) {
  return "tag " + std::to_string(tag) + ", " + format_bytes(bytes);
}

// The words of TCP's and verbs' over-cap failure, so users see one message.
std::string over_cap(int from, const RingHeader& header, const Mailbox& mailbox) {
  return "rank " + std::to_string(from) + " sent a " + format_bytes(header.length) +
         " message (tag " + std::to_string(header.tag) +
         ") that no recv_bytes waited for; at most RLX_UNEXPECTED_BYTES = " +
         format_bytes(mailbox.byte_cap()) + " can be held for later (" +
         format_bytes(mailbox.held_bytes()) + " held)";
}

}  // namespace

PointToPoint::PointToPoint(const Node& node, Mailbox& mailbox, const FailureLatch& latch,
                           std::chrono::milliseconds timeout, SpinPolicy policy, Hooks hooks)
    : node_(node),
      mailbox_(mailbox),
      latch_(latch),
      timeout_(timeout),
      policy_(policy),
      hooks_(std::move(hooks)) {
  const int me = node.local_rank();
  for (int local = 0; local < node.local_size(); ++local) {
    inbound_.push_back(std::make_unique<Inbound>(node.ring(local, me)));
    outbound_.push_back(std::make_unique<Outbound>(node.ring(me, local)));
  }
  drainer_ = std::thread([this] { drain_loop(); });
}

PointToPoint::~PointToPoint() {
  stopping_.store(true, std::memory_order_seq_cst);
  node_.control(node_.local_rank()).drain_bell.wake();
  drainer_.join();
}

RingWait PointToPoint::wait_for(int local) const {
  Doorbell& peer_drain = node_.control(local).drain_bell;
  return {.own = &node_.control(node_.local_rank()).bell,
          .other = &node_.control(local).bell,
          .policy = policy_,
          .timeout = timeout_,
          .stop = [this, local] { return latch_.tripped() || node_.has_closed(local); },
          .before_sleep = [&peer_drain] { peer_drain.wake(); }};
}

CollectiveError PointToPoint::closed_error(const ErrorSite& site, int peer,
                                           std::string_view what) const {
  return peer_shut_down(site, peer, what);
}

void PointToPoint::fail_hard(CollectiveError error) {
  hooks_.fail(error);
  latch_.rethrow_if_tripped(error.site());
  throw error;
}

void PointToPoint::send(int to, Tag tag, std::span<const std::byte> payload) {
  const int local = node_.local_of(to);
  Outbound& out = *outbound_[static_cast<std::size_t>(local)];
  std::lock_guard lock(out.producer);
  const auto site = [&] {
    return hooks_.site("send_bytes", to, describe_message(tag, payload.size()));
  };
  if (latch_.tripped()) latch_.rethrow_if_tripped(site());
  // A receiver that closed reads nothing more: the message would be lost.
  if (node_.has_closed(local)) throw closed_error(site(), to, ": nothing sent now can reach it");
  RingWait wait = wait_for(local);
  wait.site = std::ref(site);  // held by reference: no allocation per message
  if (guarded([&] { return out.ring.send(tag, payload, wait); })) return;
  latch_.rethrow_if_tripped(site());
  if (node_.has_closed(local)) {
    throw closed_error(site(), to, " while this message waited for room in its channel");
  }
  fail_hard(CollectiveError(
      ErrorKind::timeout, site(),
      "rank " + std::to_string(to) + " read nothing from its shared-memory channel within " +
          std::to_string(timeout_.count()) + " ms (ring full)",
      "is rank " + std::to_string(to) + " alive? A stopped process neither reads nor drains"));
}

template <class Step>
auto PointToPoint::guarded(Step&& step) -> decltype(step()) {
  try {
    return step();
  } catch (const CollectiveError& error) {
    // Corrupt shared memory: the channel cannot be trusted again.
    if (error.kind() != ErrorKind::protocol_violation) throw;
    fail_hard(error);
  }
}

std::vector<std::byte> PointToPoint::take_payload(int local, Inbound& in, const RingHeader& header,
                                                  RingWait& wait, std::string_view operation) {
  const int from = node_.world_rank(local);
  std::vector<std::byte> message;
  try {
    message.resize(header.length);
  } catch (const std::exception&) {  // bad_alloc, or a length above max_size()
    fail_hard(
        CollectiveError(ErrorKind::resource_exhausted,
                        hooks_.site(operation, from, describe_message(header.tag, header.length)),
                        "cannot allocate " + format_bytes(header.length) +
                            " for a message from rank " + std::to_string(from)));
  }
  read_payload(local, in, header, wait, operation, message);
  return message;
}

void PointToPoint::read_payload(int local, Inbound& in, const RingHeader& header, RingWait& wait,
                                std::string_view operation, std::span<std::byte> into) {
  if (guarded([&] { return in.ring.take_payload(into, wait); })) return;
  const int from = node_.world_rank(local);
  const ErrorSite site = hooks_.site(operation, from, describe_message(header.tag, header.length));
  latch_.rethrow_if_tripped(site);
  if (node_.has_closed(local)) fail_hard(closed_error(site, from, " in the middle of a message"));
  fail_hard(CollectiveError(ErrorKind::timeout, site,
                            "rank " + std::to_string(from) + " stopped in the middle of a message",
                            "is rank " + std::to_string(from) + " alive?"));
}

std::optional<std::vector<std::byte>> PointToPoint::take_parked(Inbound& in, int from, Tag tag,
                                                                Deadline until) {
  if (in.parked.load(std::memory_order_acquire) == 0 && until == Deadline{}) return std::nullopt;
  auto message =
      until == Deadline{} ? mailbox_.try_take(from, tag) : mailbox_.take(from, tag, until);
  if (message) in.parked.fetch_sub(1, std::memory_order_acq_rel);
  return message;
}

void PointToPoint::park_next(int local, Inbound& in, const RingHeader& header, RingWait& wait,
                             std::string_view operation) {
  const int from = node_.world_rank(local);
  if (!fits_under_cap(from, header)) {
    fail_hard(CollectiveError(
        ErrorKind::resource_exhausted,
        hooks_.site(operation, from, describe_message(header.tag, header.length)),
        over_cap(from, header, mailbox_), "receive them, or raise RLX_UNEXPECTED_BYTES"));
  }
  auto message = take_payload(local, in, header, wait, operation);
  in.parked.fetch_add(1, std::memory_order_acq_rel);
  (void)mailbox_.deliver(from, header.tag, std::move(message), /*awaited=*/true);  // cap checked
}

std::vector<std::byte> PointToPoint::recv(int from, Tag tag) {
  return std::move(*receive(from, tag, Target{}, true)->whole);
}

PointToPoint::Received PointToPoint::recv_into(int from, Tag tag, std::span<std::byte> into,
                                               std::size_t element) {
  return *receive(from, tag, Target{into, element, true}, true);
}

std::optional<PointToPoint::Received> PointToPoint::try_recv_into(int from, Tag tag,
                                                                  std::span<std::byte> into,
                                                                  std::size_t element) {
  return receive(from, tag, Target{into, element, true}, false);
}

PointToPoint::Received PointToPoint::place(std::vector<std::byte> message,
                                           const Target& target) const {
  const std::size_t length = message.size();
  if (!target.takes(length)) return {length, std::move(message)};
  if (length > 0) std::memcpy(target.into.data(), message.data(), length);
  return {length, std::nullopt};
}

std::optional<PointToPoint::Received> PointToPoint::receive(int from, Tag tag, Target target,
                                                            bool block) {
  const int local = node_.local_of(from);
  Inbound& in = *inbound_[static_cast<std::size_t>(local)];
  in.receiving.fetch_add(1, std::memory_order_seq_cst);
  struct Done {
    Inbound& in;
    Doorbell& drain;
    ~Done() {
      in.receiving.fetch_sub(1, std::memory_order_seq_cst);
      if (in.ring.producer_stalled()) drain.wake();  // the drainer kept off for us
    }
  } done{in, node_.control(node_.local_rank()).drain_bell};
  RingWait wait = wait_for(local);
  wait.site = [this, from, tag] {
    return hooks_.site("recv_bytes", from, "tag " + std::to_string(tag));
  };
  const auto timed_out = [&] {
    latch_.rethrow_if_tripped(wait.site());
    return CollectiveError(ErrorKind::timeout, wait.site(),
                           "no message arrived within " + std::to_string(timeout_.count()) + " ms",
                           "does rank " + std::to_string(from) + " send with this tag?");
  };
  // Another thread reading this ring (a receive of another tag, or the
  // drainer) parks what is not its own in the mailbox: wait there meanwhile.
  std::unique_lock lock(in.consumer, std::try_to_lock);
  if (!block && !lock.owns_lock()) {
    if (auto message = take_parked(in, from, tag)) return place(std::move(*message), target);
    return std::nullopt;
  }
  while (!lock.owns_lock()) {
    const auto slice = std::min(wait.until(), Clock::now() + std::chrono::milliseconds(1));
    if (auto message = take_parked(in, from, tag, slice)) return place(std::move(*message), target);
    if (Clock::now() >= wait.until()) throw timed_out();
    lock.try_lock();
  }
  if (auto message = take_parked(in, from, tag)) return place(std::move(*message), target);
  // A reader that failed mid-message (the drainer) broke the channel; the
  // failure it recorded is the answer.
  if (latch_.tripped()) latch_.rethrow_if_tripped(wait.site());
  for (;;) {
    if (!block) {
      // Read before the ring: a peer marks itself closed after its last write.
      const bool closed = node_.has_closed(local);
      if (!in.ring.has_message()) {
        if (closed && !latch_.tripped()) {
          throw closed_error(wait.site(), from,
                             " and sent no more messages with tag " + std::to_string(tag));
        }
        return std::nullopt;
      }
    }
    const auto header = guarded([&] { return in.ring.take_header(wait); });
    if (!header) {
      // Only once its ring is read to the end: what it sent before it closed
      // is delivered.
      if (!latch_.tripped() && node_.has_closed(local)) {
        throw closed_error(wait.site(), from,
                           " and sent no more messages with tag " + std::to_string(tag));
      }
      throw timed_out();
    }
    if (header->tag != tag) {
      park_next(local, in, *header, wait, "recv_bytes");
      continue;
    }
    if (!target.takes(header->length)) {
      return Received{header->length, take_payload(local, in, *header, wait, "recv_bytes")};
    }
    read_payload(local, in, *header, wait, "recv_bytes", target.into.first(header->length));
    return Received{header->length, std::nullopt};
  }
}

bool PointToPoint::fits_under_cap(int from, const RingHeader& header) const {
  const std::size_t held = std::min(mailbox_.held_bytes(), mailbox_.byte_cap());
  return header.length <= mailbox_.byte_cap() - held || mailbox_.awaited(from, header.tag);
}

void PointToPoint::drain(int local, Inbound& in) {
  const int from = node_.world_rank(local);
  in.ring.clear_stalled();
  RingWait wait = wait_for(local);
  wait.site = [this, from] { return hooks_.site("receive", from, {}); };
  while (!stopping_.load(std::memory_order_relaxed) && in.ring.has_message() && !latch_.tripped()) {
    const auto header = guarded([&] { return in.ring.take_header(wait); });
    if (!header) return;
    park_next(local, in, *header, wait, "receive");
  }
}

void PointToPoint::drain_loop() {
  Doorbell& bell = node_.control(node_.local_rank()).drain_bell;
  const auto someone_stalled = [&] {
    if (stopping_.load(std::memory_order_relaxed)) return true;
    for (const auto& in : inbound_) {
      if (in->ring.producer_stalled() && in->receiving.load(std::memory_order_relaxed) == 0) {
        return true;
      }
    }
    return false;
  };
  while (!stopping_.load(std::memory_order_acquire)) {
    wait_until(bell, someone_stalled, Clock::now() + std::chrono::seconds(1), {.spin = {}});
    for (std::size_t local = 0; local < inbound_.size(); ++local) {
      Inbound& in = *inbound_[local];
      if (!in.ring.producer_stalled() || in.receiving.load(std::memory_order_seq_cst) > 0) continue;
      std::unique_lock lock(in.consumer, std::try_to_lock);
      if (!lock.owns_lock()) continue;
      try {
        drain(static_cast<int>(local), in);
      } catch (const CollectiveError&) {
        return;  // recorded in the latch by fail_hard; every call now rethrows it
      }
    }
  }
}

}  // namespace rlx::shm
