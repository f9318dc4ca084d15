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
      single_copy_(std::move(single_copy)),
      deferred_(static_cast<std::size_t>(shm::NodeShape::kCallSlots)),
      peers_calls_read_(static_cast<std::size_t>(node.local_size()), 0) {}

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
