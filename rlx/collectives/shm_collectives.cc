#include "rlx/collectives/shm_collectives.h"

#include <cstring>

#include "rlx/transport/log.h"

namespace rlx {

using Phase = shm::Progress;

ShmCollectives::ShmCollectives(const shm::Node& node, const FailureLatch& latch,
                               std::chrono::milliseconds timeout, shm::SpinPolicy policy,
                               Hooks hooks, SingleCopyPeers single_copy)
    : node_(node),
      latch_(latch),
      timeout_(timeout),
      policy_(policy),
      hooks_(std::move(hooks)),
      single_copy_(std::move(single_copy)) {}

ErrorSite ShmCollectives::site_of(const CollectiveCall& call, int peer) const {
  return hooks_.site(call.describe(), peer < 0 ? -1 : node_.world_rank(peer), {});
}

void ShmCollectives::fail_with(CollectiveError error) {
  hooks_.fail(error);
  latch_.rethrow_if_tripped(error.site());  // the first failure is the one every rank reports
  throw error;
}

void ShmCollectives::ring_peers() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (int peer = 0; peer < local_size(); ++peer) {
    if (peer != local_rank()) node_.control(peer).bell.wake_if_sleeping();
  }
}

template <class Ready>
void ShmCollectives::wait_or_throw(Ready&& ready, int peer, const CollectiveCall& call,
                                   std::string_view what) {
  if (ready()) return;
  shm::Doorbell& bell = node_.control(local_rank()).bell;
  const bool arrived = shm::wait_until(
      bell, [&] { return ready() || latch_.tripped() || node_.has_closed(peer); },
      Clock::now() + timeout_, policy_);
  // What arrived wins over a failure found meanwhile: a peer that did its
  // part of this call and then exited or closed cost this call nothing.
  if (arrived && ready()) return;
  if (latch_.tripped()) latch_.rethrow_if_tripped(hooks_.site(call.describe(), -1, {}));
  const int rank = node_.world_rank(peer);
  if (node_.has_closed(peer)) {
    fail_with(CollectiveError(
        ErrorKind::peer_lost, site_of(call, peer),
        "rank " + std::to_string(rank) +
            " (same host, shared memory) has shut down its transport "
            "before it " +
            std::string(what),
        "did rank " + std::to_string(rank) + " close its group or return from main early?"));
  }
  fail_with(CollectiveError(
      ErrorKind::timeout, site_of(call, peer),
      "rank " + std::to_string(rank) + " (same host, shared memory) has not " + std::string(what) +
          " within " + std::to_string(timeout_.count()) + " ms" + hooks_.describe_silent_peers(),
      "a rank that never reached this collective, or a stopped process "
      "(RLX_TIMEOUT_S sets the deadline)"));
}

void ShmCollectives::fail_abandoned(const CollectiveCall& call, int peer) {
  // Its own failure is on its way to every rank: that is the one to report
  // (single copy's readers, shm_single_copy.cc).
  wait_or_throw([&] { return latch_.tripped(); }, peer, call, "said why it gave up on this call");
  latch_.rethrow_if_tripped(hooks_.site(call.describe(), -1, {}));
  fail_with(CollectiveError(ErrorKind::timeout, site_of(call, peer),
                            "rank " + std::to_string(node_.world_rank(peer)) +
                                " gave up on this call before this rank had read its buffer "
                                "(single copy)"));
}

std::uint64_t ShmCollectives::post_call(const CollectiveCall& call,
                                        std::span<const std::byte> inline_payload) {
  latch_.rethrow_if_tripped();
  const std::uint64_t number = calls_++;
  shm::CallLine& mine = node_.call_line(local_rank(), number);
  if (!inline_payload.empty() && fits_inline(inline_payload.size())) {
    std::memcpy(node_.call_payload(local_rank(), number), inline_payload.data(),
                inline_payload.size());
  }
  mine.call = encode_call(call);
  mine.sequence.store(number + 1, std::memory_order_release);
  ring_peers();
  return number;
}

void ShmCollectives::check_calls(const CollectiveCall& call, std::uint64_t number) {
  for (int peer = 0; peer < local_size(); ++peer) {
    if (peer == local_rank()) continue;
    const shm::CallLine& theirs = node_.call_line(peer, number);
    wait_or_throw([&] { return theirs.sequence.load(std::memory_order_acquire) == number + 1; },
                  peer, call, "entered this collective");
    const auto posted = decode_call(theirs.call, call.sequence);
    if (!posted) {
      fail_with(CollectiveError(ErrorKind::protocol_violation, site_of(call, peer),
                                "rank " + std::to_string(node_.world_rank(peer)) +
                                    " posted a call that is not one (corrupt shared memory)"));
    }
    if (*posted != call) {
      fail_with(CollectiveError(ErrorKind::mismatch, site_of(call, peer),
                                "rank " + std::to_string(node_.world_rank(peer)) + " called " +
                                    posted->describe() + " while this rank called " +
                                    call.describe(),
                                "every rank must call the same collectives in the same order "
                                "with the same sizes"));
    }
  }
}

std::uint64_t ShmCollectives::open_call(const CollectiveCall& call,
                                        std::span<const std::byte> inline_payload) {
  const std::uint64_t number = post_call(call, inline_payload);
  check_calls(call, number);
  return number;
}

std::uint64_t ShmCollectives::take_ticket(const CollectiveCall& call) {
  const std::uint64_t ticket = tickets_++;
  const auto slots = static_cast<std::uint64_t>(node_.shape().slots);
  if (ticket >= slots) {
    for (int peer = 0; peer < local_size(); ++peer) {
      if (peer != local_rank()) wait_for(peer, Phase::done, ticket - slots, call);
    }
  }
  return ticket;
}

void ShmCollectives::publish(Phase phase, std::uint64_t ticket) {
  node_.control(local_rank()).progress(phase).store(ticket + 1, std::memory_order_release);
  ring_peers();
}

void ShmCollectives::wait_for(int peer, Phase phase, std::uint64_t ticket,
                              const CollectiveCall& call) {
  const auto& counter = node_.control(peer).progress(phase);
  const char* what = phase == Phase::staged    ? "staged its data"
                     : phase == Phase::reduced ? "reduced its block"
                                               : "finished reading";
  wait_or_throw([&] { return counter.load(std::memory_order_acquire) > ticket; }, peer, call, what);
}

void ShmCollectives::wait_for_all(Phase phase, std::uint64_t ticket, const CollectiveCall& call) {
  for (int peer = 0; peer < local_size(); ++peer) {
    if (peer != local_rank()) wait_for(peer, phase, ticket, call);
  }
}

std::string ShmCollectives::protocol(std::size_t posted_bytes) const {
  const shm::NodeShape& shape = node_.shape();
  const std::string how = fits_inline(posted_bytes)
                              ? "one-shot through the call lines (" + format_bytes(posted_bytes) +
                                    " fits their " + format_bytes(shape.call_capacity()) + ")"
                              : "pipelined through " + std::to_string(shape.slots) +
                                    " staging slots of " + format_bytes(shape.slot_bytes) + " (" +
                                    format_bytes(posted_bytes) + " is over the call lines' " +
                                    format_bytes(shape.call_capacity()) + ")";
  return "shared memory among " + std::to_string(local_size()) + " ranks, " + how;
}

void ShmCollectives::check_call(const CollectiveCall& call) { open_call(call, {}); }

void ShmCollectives::barrier(const CollectiveCall& call) { open_call(call, {}); }

}  // namespace rlx
