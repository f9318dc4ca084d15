// The call lines: how a rank posts its call, checks its peers', and knows
// when a line may be reused.
//
// Each rank's segment holds its last NodeShape::kCallSlots calls, a call
// line each (and a small payload slot for inline payloads of up to 1 KiB),
// kMidPayloadSlots of their payloads of up to 4 KiB and kPayloadSlots of
// their larger inline payloads. A rank that needs the
// others' data (or must fail with them on a mismatch before any data moves)
// reads their lines of this call at once. One that needs nothing of them
// posts and returns, and leaves the check of their lines for later: a small
// broadcast's or scatter's root (it checks every peer's line) and a small
// reduce's or gather's non-roots (they check the root's). Those are the
// calls where every rank waiting for every other rank cost most, with more
// ranks than cores. Every mismatch is still found: each non-root compares
// its call with its root's, and a root (or a rank whose root disagrees)
// with every rank's, so a rank that wrongly thinks it is the root fails
// too; the rank whose call returned fails at its next collective (or its
// close), and the failure reaches every rank.
//
// A slot is reused once every peer finished reading the call it held: each
// rank publishes how many of its calls it read every line of
// (RankControl::calls_read) as its next call starts, and again whenever a
// wait of its own is about to sleep (the lines its deferred checks wanted
// may have come meanwhile: two ranks that each waited for the other's stale
// count would wait forever), and waits for its peers' counts before it
// overwrites a slot. So a rank runs at most kCallSlots - 1 calls ahead of
// the slowest peer with payloads that fit the call slot, kMidPayloadSlots -
// 1 or kPayloadSlots - 1 with larger ones (NodeShape::payload_depth).
//
// That no rank waits forever rests on a rule each call that returns without
// waiting keeps: when a rank posts a payload over kSmallPayloadBytes (16
// or 4 slots deep), every rank that may return without its line posts the
// same size or nothing (reduce and gather: the same; broadcast and scatter
// non-roots: nothing, and they wait for the root's line). A deferred call
// of uneven sizes (a gather_v) would break it: counts left stale by a rank
// that returned would hold the poster that many calls on.
#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>

#include "rlx/collectives/shm_collectives.h"

namespace rlx {

std::uint64_t ShmCollectives::post_call(const CollectiveCall& call,
                                        std::span<const std::byte> inline_payload) {
  // Reported as this call's: a failure heard before it began (a peer that
  // exited as the job started) is what it met.
  if (latch_.tripped()) latch_.rethrow_if_tripped(site_of(call, -1));
  const std::uint64_t number = open_number_ = calls_;
  const std::size_t bytes = fits_inline(inline_payload.size()) ? inline_payload.size() : 0;
  make_room(call, number, shm::NodeShape::payload_depth(bytes));
  ++calls_;
  shm::CallLine& mine = node_.call_line(local_rank(), number);
  if (bytes > 0) {
    std::memcpy(node_.call_payload(local_rank(), number, bytes), inline_payload.data(), bytes);
  }
  mine.call = encode_call(call);
  mine.sequence.store(number + 1, std::memory_order_release);
  ring_peers();
  return number;
}

void ShmCollectives::make_room(const CollectiveCall& call, std::uint64_t number,
                               int payload_depth) {
  // A line or slot's last call was `reuse` calls back: done with by a rank
  // whose count passed it.
  const auto after_reuse = [number](int reuse) {
    const auto back = static_cast<std::uint64_t>(reuse);
    return number >= back ? number - back + 1 : 0;
  };
  const std::uint64_t line_free = after_reuse(shm::NodeShape::kCallSlots);
  const std::uint64_t needed = std::max(line_free, after_reuse(payload_depth));
  run_deferred_checks(line_free);
  publish_calls_read(calls_read_now());
  if (needed == 0) return;
  for (int peer = 0; peer < local_size(); ++peer) {
    std::uint64_t& seen = peers_calls_read_[static_cast<std::size_t>(peer)];
    if (peer == local_rank() || seen >= needed) continue;
    const auto& counter = node_.control(peer).calls_read;
    const auto caught_up = [&] {
      seen = counter.load(std::memory_order_acquire);
      return seen >= needed;
    };
    if (!caught_up()) {
      ring_peers();  // it may be waiting for this rank's count, just published
      wait_or_throw(caught_up, peer, call,
                    "finished this rank's call " + std::to_string(number + 1 - needed) +
                        " collectives back (ranks run at most that far apart)");
    }
    // No rank gets further ahead than its call lines: a count beyond is not one.
    if (seen > number + shm::NodeShape::kCallSlots) {
      fail_with(CollectiveError(ErrorKind::protocol_violation, site_of(call, peer),
                                "rank " + std::to_string(node_.world_rank(peer)) +
                                    " published that it read " + std::to_string(seen) +
                                    " calls while this rank is at call " + std::to_string(number) +
                                    " (corrupt shared memory)"));
    }
  }
  // The peers finished every call before `needed`, so their lines of those
  // are here: check them now. A rank that next blocks outside these calls
  // (in a receive) must not leave a count a peer's next call waits on.
  run_deferred_checks(0);
  publish_calls_read(calls_read_now());
}

std::uint64_t ShmCollectives::calls_read_now() const {
  return deferred_begin_ < deferred_end_ ? deferred_[deferred_begin_ % deferred_.size()].number
                                         : open_number_;
}

bool ShmCollectives::publish_calls_read(std::uint64_t calls_read) {
  if (calls_read == published_calls_read_) return false;
  node_.control(local_rank()).calls_read.store(calls_read, std::memory_order_release);
  published_calls_read_ = calls_read;
  return true;
}

void ShmCollectives::advance_deferred_checks() {
  if (running_deferred_checks_) return;
  run_deferred_checks(0);
  // Even with none left: the last ones may have run since the count was published.
  if (publish_calls_read(calls_read_now())) ring_peers();
}

bool ShmCollectives::check_line(const CollectiveCall& call, std::uint64_t number, int peer,
                                bool wait, bool deferred) {
  const shm::CallLine& theirs = node_.call_line(peer, number);
  const auto posted = [&] { return theirs.sequence.load(std::memory_order_acquire) == number + 1; };
  if (!posted()) {
    if (!wait) return false;
    wait_or_throw(posted, peer, call, "entered this collective");
  }
  if (auto error = line_error(call, number, peer, deferred)) fail_with(std::move(*error));
  return true;
}

std::optional<CollectiveError> ShmCollectives::line_error(const CollectiveCall& call,
                                                          std::uint64_t number, int peer,
                                                          bool deferred) const {
  // Equal calls encode alike (call_codec.h), and this rank's line of
  // `number` holds its own: only a line that differs needs decoding.
  const EncodedCall& theirs = node_.call_line(peer, number).call;
  const EncodedCall& mine = node_.call_line(local_rank(), number).call;
  if (std::memcmp(theirs.data(), mine.data(), mine.size()) == 0) return std::nullopt;
  const auto decoded = decode_call(theirs, call.sequence);
  const int rank = node_.world_rank(peer);
  if (!decoded) {
    return CollectiveError(
        ErrorKind::protocol_violation, site_of(call, peer),
        "rank " + std::to_string(rank) + " posted a call that is not one (corrupt shared memory)");
  }
  if (*decoded == call) return std::nullopt;
  return CollectiveError(
      ErrorKind::mismatch, site_of(call, peer),
      "rank " + std::to_string(rank) + " called " + decoded->describe() +
          " while this rank called " + call.describe() +
          (deferred ? "; found after this rank's call returned (a small broadcast's or "
                      "scatter's root and a small reduce's or gather's other ranks return "
                      "without waiting)"
                    : ""),
      "every rank must call the same collectives in the same order with the same sizes");
}

std::string ShmCollectives::unchecked_mismatch() const {
  for (std::uint64_t i = deferred_begin_; i < deferred_end_; ++i) {
    const DeferredCheck& check = deferred_[i % deferred_.size()];
    for (int peer = 0; peer < local_size(); ++peer) {
      if (peer == local_rank() || (check.only_peer >= 0 && peer != check.only_peer)) continue;
      const auto& sequence = node_.call_line(peer, check.number).sequence;
      if (sequence.load(std::memory_order_acquire) != check.number + 1) continue;
      if (auto error = line_error(check.call, check.number, peer, /*deferred=*/true)) {
        return error->what();
      }
    }
  }
  return {};
}

void ShmCollectives::drain_deferred_checks() { run_deferred_checks(calls_); }

void ShmCollectives::check_calls(const CollectiveCall& call, std::uint64_t number) {
  run_deferred_checks(number);  // none left when drained before the post
  for (int peer = 0; peer < local_size(); ++peer) {
    if (peer != local_rank()) check_line(call, number, peer, /*wait=*/true, /*deferred=*/false);
  }
}

void ShmCollectives::check_call_of(const CollectiveCall& call, std::uint64_t number, int peer) {
  if (peer != local_rank()) check_line(call, number, peer, /*wait=*/true, /*deferred=*/false);
}

void ShmCollectives::prefetch_lines(std::uint64_t number, std::size_t payload_bytes) const {
  // The small payload slot's size: a mid or large slot's first lines
  // would not save the rest from streaming in behind them.
  constexpr std::size_t kMostPrefetched = shm::NodeShape::kSmallPayloadBytes;
  constexpr std::size_t kCacheLine = 64;
  const bool payload_in_slot = !shm::NodeShape::fits_line(payload_bytes);
  for (int peer = 0; peer < local_size(); ++peer) {
    if (peer == local_rank()) continue;
    __builtin_prefetch(&node_.call_line(peer, number));
    if (!payload_in_slot) continue;
    const std::byte* payload = node_.call_payload(peer, number, payload_bytes);
    for (std::size_t at = 0; at < std::min(payload_bytes, kMostPrefetched); at += kCacheLine) {
      __builtin_prefetch(payload + at);
    }
  }
}

std::uint64_t ShmCollectives::open_call(const CollectiveCall& call,
                                        std::span<const std::byte> inline_payload) {
  prefetch_lines(calls_, fits_inline(inline_payload.size()) ? inline_payload.size() : 0);
  drain_deferred_checks();
  const std::uint64_t number = post_call(call, inline_payload);
  check_calls(call, number);
  return number;
}

void ShmCollectives::defer_check(const CollectiveCall& call, std::uint64_t number, int only_peer) {
  // The rule above: calls whose payload the call fixes on every rank (or
  // that only the root posts), never one of uneven sizes.
  assert(call.kind == CollectiveKind::reduce || call.kind == CollectiveKind::gather ||
         call.kind == CollectiveKind::broadcast || call.kind == CollectiveKind::scatter);
  if (only_peer == local_rank() || local_size() == 1) return;
  deferred_[deferred_end_++ % deferred_.size()] = {
      .number = number, .call = call, .only_peer = only_peer};
}

void ShmCollectives::run_deferred_checks(std::uint64_t through) {
  if (deferred_begin_ == deferred_end_) return;
  // Its waits call advance_deferred_checks, which must not run it again.
  running_deferred_checks_ = true;
  struct Done {
    bool& running;
    ~Done() { running = false; }
  } done{running_deferred_checks_};
  for (; deferred_begin_ < deferred_end_; ++deferred_begin_) {
    const DeferredCheck& check = deferred_[deferred_begin_ % deferred_.size()];
    const bool wait = check.number < through;
    // Before waiting: the peers may need this rank's count for the very
    // calls whose lines it waits for.
    if (wait && publish_calls_read(check.number)) ring_peers();
    for (int peer = 0; peer < local_size(); ++peer) {
      if (peer == local_rank() || (check.only_peer >= 0 && peer != check.only_peer)) continue;
      if (!check_line(check.call, check.number, peer, wait, /*deferred=*/true)) return;
    }
  }
}

void ShmCollectives::finish_deferred_checks() {
  close_deadline_ = Clock::now() + timeout_;
  run_deferred_checks(std::numeric_limits<std::uint64_t>::max());
  open_number_ = calls_;
  publish_calls_read(calls_);
  ring_peers();
}

}  // namespace rlx
