// A single-producer, single-consumer queue of tagged messages in shared
// memory: the same-host path's point-to-point channel, one per ordered pair
// of ranks, in the receiver's segment.
//
// Bytes flow through a ring of `capacity` bytes; each message is a 16-byte
// header (length, tag, a check word) and its payload, padded to 8. A message
// larger than a quarter of the ring streams through it: the producer
// publishes each piece of at most a quarter as space frees and the consumer
// copies it out meanwhile, so size is unbounded and large messages
// pipeline. Both sides wait with deadlines on their rank's Doorbell and
// ring the other side's after every step, which costs a system call only
// when the other side sleeps.
//
// A side that stops (deadline, failure) after a message began leaves the
// ring mid-message: the caller must treat the channel as broken, as TCP does
// a connection that timed out mid-frame.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "rlx/transport/shm/futex.h"
#include "rlx/transport/transport.h"

namespace rlx::shm {

// How one side of a ring waits: where it sleeps, whom it tells, until when.
struct RingWait {
  Doorbell* own = nullptr;    // this side's rank sleeps here
  Doorbell* other = nullptr;  // rung after this side made room or data
  SpinPolicy policy;
  // Until when to wait: `deadline` when set, else `timeout` from the first
  // wait on (a call that never waits never reads the clock).
  Deadline deadline{};
  std::chrono::milliseconds timeout{0};
  // Polled while waiting: true stops the wait (the transport failed).
  std::function<bool()> stop = [] { return false; };
  // Producer only: called before the producer sleeps for want of space (the
  // receiver is not reading: its transport can drain the ring for it).
  std::function<void()> before_sleep = [] {};
  // Where corrupt counters or headers are reported (built only then).
  std::function<ErrorSite()> site = [] { return ErrorSite{}; };

  Deadline until() {
    if (deadline == Deadline{}) deadline = Clock::now() + timeout;
    return deadline;
  }
};

// The header in front of every message, as it lies in shared memory.
struct RingHeader {
  std::uint64_t length = 0;
  std::uint32_t tag = 0;
  std::uint32_t check = 0;  // kRingHeaderCheck ^ tag ^ low bits of length
};
static_assert(sizeof(RingHeader) == 16);

// Largest message length a header may announce (1 TiB): more is corruption.
inline constexpr std::uint64_t kMaxRingMessage = std::uint64_t{1} << 40;

RingHeader make_ring_header(Tag tag, std::uint64_t length);
// Empty when `header` is one make_ring_header could have written; otherwise
// what is wrong with it (a corrupt or foreign ring).
std::optional<std::string> ring_header_problem(const RingHeader& header);

class MessageRing {
 public:
  // Where the producer's and the consumer's counters (bytes published and
  // consumed, ever) lie in a ring's shared bytes, for tests that corrupt them.
  static constexpr std::size_t kWrittenOffset = 64;
  static constexpr std::size_t kReadOffset = 128;

  // Shared bytes a ring of `capacity` data bytes occupies (control + data).
  // `capacity` must be a power of two of at least 64.
  static std::size_t footprint(std::size_t capacity);
  // Lays out an empty ring at `memory` (64-byte aligned): once, by the
  // consumer, before the producer attaches.
  static MessageRing create(std::byte* memory, std::size_t capacity);
  // The same ring seen from the other process; throws std::invalid_argument
  // when `memory` holds no ring of that capacity.
  static MessageRing attach(std::byte* memory, std::size_t capacity);

  // Producer. Copies the header and `payload` in; false when the wait ended
  // first (deadline or stop). Throws CollectiveError (protocol_violation, at
  // wait.site()) when the ring's counters are corrupt: nothing is copied
  // outside the ring whatever shared memory holds.
  bool send(Tag tag, std::span<const std::byte> payload, RingWait& wait);
  // Producer: true once it waited for space and nobody has drained since.
  bool producer_stalled() const;

  // Consumer. True when a message's header can be read now.
  bool has_message() const;
  // Waits for and takes the next header. nullopt when the wait ended first
  // with nothing to read (a message already there is taken even when
  // wait.stop() holds); throws CollectiveError (protocol_violation, at
  // wait.site()) when the header or the counters are corrupt.
  std::optional<RingHeader> take_header(RingWait& wait);
  // Copies the payload of the header just taken into `into` (its length) and
  // frees both; false when the wait ended first.
  bool take_payload(std::span<std::byte> into, RingWait& wait);
  // Consumer: clears producer_stalled() (it is about to drain).
  void clear_stalled();

  // True when this side stopped in the middle of a message.
  bool mid_message() const { return mid_message_; }

 private:
  struct Control;
  MessageRing(Control* control, std::byte* data, std::size_t capacity);

  // Producer: waits until `bytes` are free past `written`; consumer: until
  // `bytes` are readable past read_.
  bool wait_for_space(std::uint64_t written, std::size_t bytes, RingWait& wait);
  bool wait_for_data(std::size_t bytes, RingWait& wait);
  // Producer: free bytes past `written`, from the consumer's position as last
  // read (read again only when that is not enough: it is the consumer's line).
  std::uint64_t free_space(std::uint64_t written, std::size_t wanted, RingWait& wait);
  // Consumer: bytes published past read_.
  std::uint64_t readable(RingWait& wait) const;
  [[noreturn]] void fail_corrupt(RingWait& wait, std::uint64_t written, std::uint64_t read) const;
  void copy_in(std::uint64_t at, const std::byte* from, std::size_t bytes);
  void copy_out(std::uint64_t at, std::byte* to, std::size_t bytes) const;
  void publish(std::uint64_t written, RingWait& wait);
  void release(RingWait& wait);  // up to read_
  // The most either side copies before it publishes or releases: a quarter
  // of the ring, so the producer fills one piece while the consumer empties
  // another. Whole-ring pieces made the two copies of a large message take
  // turns (docs/BENCHMARKS.md, "Point-to-point on one host: pieces of a
  // quarter ring").
  std::size_t piece_limit() const { return std::max<std::size_t>(capacity_ / 4, 8); }
  // Streams `bytes` (padded to 8) in or out, piece by piece.
  bool stream_in(const std::byte* from, std::size_t bytes, RingWait& wait);
  bool stream_out(std::byte* to, std::size_t bytes, RingWait& wait);

  Control* control_;
  std::byte* data_;
  std::size_t capacity_;
  std::uint64_t cached_read_ = 0;  // producer: the consumer's position as last read
  std::uint64_t read_ = 0;         // consumer: taken so far (released at the payload's end)
  bool mid_message_ = false;
};

}  // namespace rlx::shm
