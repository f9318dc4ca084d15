// The shared memory of the ranks of one host: each rank's segment, mapped by
// every rank of the host, laid out the same way.
//
//   RankControl   4 KiB: the rank's doorbells and its collective progress
//   call lines    kCallSlots x 64 B: the rank's recent collectives (line =
//                 call % kCallSlots), inline payloads of up to 40 B in them
//   small payloads kCallSlots x 1 KiB: inline payloads of 41 B to 1 KiB
//   call payloads kPayloadSlots x call_bytes: larger inline payloads (slot =
//                 call % kPayloadSlots)
//   rings         one MessageRing per local sender (messages *to* this rank)
//   staging       `slots` slots of slot_bytes: pieces of large collectives
//
// Every field is written by the segment's owner only, except the rings'
// producer counters and the doorbells, so no two ranks write one cache line.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rlx/transport/call_codec.h"
#include "rlx/transport/collective_call.h"
#include "rlx/transport/shm/futex.h"
#include "rlx/transport/shm/ring.h"
#include "rlx/transport/shm/segment.h"

namespace rlx::shm {

// Sizes of a host's segments: every rank of the host computes the same.
struct NodeShape {
  int local_size = 1;
  std::size_t ring_capacity = std::size_t{256} << 10;
  std::size_t call_bytes = std::size_t{32} << 10;  // inline payload of a call
  int slots = 4;
  std::size_t slot_bytes = std::size_t{256} << 10;

  // How many calls a rank's call lines hold at once: how far a rank that
  // waits for nobody (a broadcast's root) runs ahead of the slowest reader,
  // with payloads of up to kSmallPayloadBytes (up to 40 B ride in the line,
  // larger ones in the call's small payload slot). Payloads of up to
  // kMidPayloadBytes have kMidPayloadSlots, larger ones kPayloadSlots: fewer
  // as they grow, so the ones a loop of calls cycles through stay in cache
  // and small payloads keep to few pages. Powers of two: every call finds
  // its slot with a mask. The lines are dense: a small call moves as few
  // cache lines and pages as possible.
  static constexpr int kCallSlots = 64;
  static constexpr std::size_t kCallLineBytes = 64;
  static constexpr std::size_t kSmallPayloadBytes = 1024;
  static constexpr int kMidPayloadSlots = 16;
  static constexpr std::size_t kMidPayloadBytes = 4096;
  static constexpr int kPayloadSlots = 4;
  static_assert((kCallSlots & (kCallSlots - 1)) == 0 &&
                (kMidPayloadSlots & (kMidPayloadSlots - 1)) == 0 &&
                (kPayloadSlots & (kPayloadSlots - 1)) == 0);
  static constexpr std::size_t kControlBytes = 4096;

  // Payload bytes a call carries inline.
  std::size_t call_capacity() const { return call_bytes; }
  // How many calls deep the slots of a payload of `bytes` are: a rank that
  // posts one reuses the slot of the call that many calls back.
  static int payload_depth(std::size_t bytes) {
    return bytes <= kSmallPayloadBytes ? kCallSlots
           : bytes <= kMidPayloadBytes ? kMidPayloadSlots
                                       : kPayloadSlots;
  }
  static bool fits_line(std::size_t bytes);
  static std::size_t small_payloads_offset() {
    return kControlBytes + static_cast<std::size_t>(kCallSlots) * kCallLineBytes;
  }
  static std::size_t mid_payloads_offset() {
    return small_payloads_offset() + static_cast<std::size_t>(kCallSlots) * kSmallPayloadBytes;
  }
  static std::size_t payloads_offset() {
    return mid_payloads_offset() + static_cast<std::size_t>(kMidPayloadSlots) * kMidPayloadBytes;
  }
  std::size_t ring_offset(int from) const;
  std::size_t staging_offset() const;
  std::size_t segment_bytes() const;
};

// How far a rank got with a chunk of a large collective: it staged its
// pieces, reduced its own, finished reading everyone's.
enum class Progress { staged, reduced, done };

// The owner's doorbells, and its progress through large collectives in
// tickets (each chunk of each collective takes the next ticket on every rank
// of the host): per Progress, how many tickets it got that far with.
struct RankControl {
  alignas(64) Doorbell bell;        // the rank's calling threads sleep here
  alignas(64) Doorbell drain_bell;  // its drain thread sleeps here
  struct alignas(64) Counter {      // a line each: others read it while it is written
    std::atomic<std::uint64_t> tickets{0};
  };
  Counter progressed[3];
  // Set once, by the owner, when it shuts its transport down cleanly: after
  // its last message and its last collective step, so a peer that sees it
  // and still finds nothing to read knows nothing more will come. A rank
  // that dies never sets it; its network connection's end reports that.
  alignas(64) std::atomic<std::uint32_t> closed{0};
  // How many of the owner's calls it has finished reading every peer's call
  // lines for: a peer reuses its slot of call c only once every rank's
  // count passed c. Published as each call starts, so it trails by one.
  alignas(64) std::atomic<std::uint64_t> calls_read{0};
  // The number + 1 of the last single-copy call this rank gave up on (a
  // failure) before every peer had read its buffer: a reader that finished
  // meanwhile may have read the buffer after the caller reused it, so it
  // fails too rather than return what it read.
  alignas(64) std::atomic<std::uint64_t> abandoned{0};

  std::atomic<std::uint64_t>& progress(Progress p) {
    return progressed[static_cast<int>(p)].tickets;
  }
  const std::atomic<std::uint64_t>& progress(Progress p) const {
    return progressed[static_cast<int>(p)].tickets;
  }
};
static_assert(sizeof(RankControl) <= NodeShape::kControlBytes);

// The first line of a call slot. `sequence` (the call's number + 1) is
// stored last, with release order; the payload begins in the same line.
struct CallLine {
  std::atomic<std::uint64_t> sequence{0};
  // Decoded and checked when it differs from the reader's: a segment is not trusted.
  EncodedCall call;
  static constexpr std::size_t kInlineOffset = 24;  // where the payload starts
};
static_assert(sizeof(CallLine) <= CallLine::kInlineOffset);

class Node {
 public:
  // This rank's segment (created and laid out by create_own) and the mapped
  // segments of every rank of the host, in local order; `own` is at
  // `local_rank`. `world_ranks[i]` is local rank i's rank in the job.
  Node(NodeShape shape, int local_rank, std::vector<int> world_ranks,
       std::vector<SharedSegment> segments);

  // Creates this rank's segment, zeroed and mapped, with its rings laid out.
  static SharedSegment create_own(const std::string& directory, const std::string& name,
                                  const NodeShape& shape, const ErrorSite& site);

  const NodeShape& shape() const { return shape_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return shape_.local_size; }
  int world_rank(int local) const { return world_ranks_[static_cast<std::size_t>(local)]; }
  // The local index of job rank `rank`, or -1 when it is on another host.
  int local_of(int rank) const;

  // Inline: every small collective reads several.
  RankControl& control(int local) const {
    return *std::launder(reinterpret_cast<RankControl*>(base(local)));
  }
  CallLine& call_line(int local, std::uint64_t call_number) const {
    const auto line = static_cast<std::size_t>(call_number % NodeShape::kCallSlots);
    std::byte* at = base(local) + NodeShape::kControlBytes + line * NodeShape::kCallLineBytes;
    return *std::launder(reinterpret_cast<CallLine*>(at));
  }
  // Where call `call_number`'s inline payload of `bytes` is: in its line
  // (NodeShape::fits_line), its small or mid payload slot (payload_depth), or
  // else its payload slot.
  std::byte* call_payload(int local, std::uint64_t call_number, std::size_t bytes) const;
  // Messages from local rank `from` to local rank `to` (in `to`'s segment).
  MessageRing ring(int from, int to) const;
  std::byte* staging(int local, std::uint64_t ticket) const;

  // Tells the host's ranks that this one has shut down cleanly (see
  // RankControl::closed) and wakes every thread of theirs that sleeps.
  void announce_close() const;
  // True once local rank `local` announced its close.
  bool has_closed(int local) const {
    return control(local).closed.load(std::memory_order_acquire) != 0;
  }

 private:
  std::byte* base(int local) const { return segments_[static_cast<std::size_t>(local)].data(); }

  NodeShape shape_;
  int local_rank_;
  std::vector<int> world_ranks_;
  std::vector<SharedSegment> segments_;
};

}  // namespace rlx::shm
