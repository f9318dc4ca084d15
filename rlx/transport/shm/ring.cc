#include "rlx/transport/shm/ring.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>
#include <new>
#include <stdexcept>

namespace rlx::shm {

// Each side's counter on a cache line of its own: the producer writes
// `written` (and `stalled`), the consumer `read`.
struct MessageRing::Control {
  std::uint64_t magic;
  std::uint64_t capacity;
  alignas(64) std::atomic<std::uint64_t> written;  // bytes published, ever
  alignas(64) std::atomic<std::uint64_t> read;     // bytes consumed, ever
  alignas(64) std::atomic<std::uint32_t> stalled;  // the producer waits for space
};

namespace {

constexpr std::uint64_t kRingMagic = 0x474e49525f584c52;  // "RLX_RING"
constexpr std::uint32_t kRingHeaderCheck = 0x52484452;
constexpr std::size_t kRingControlBytes = 256;
constexpr std::size_t kHeaderBytes = sizeof(RingHeader);

std::size_t padded(std::size_t bytes) { return (bytes + 7) & ~std::size_t{7}; }

std::uint32_t check_word(std::uint32_t tag, std::uint64_t length) {
  return kRingHeaderCheck ^ tag ^ static_cast<std::uint32_t>(length);
}

}  // namespace

RingHeader make_ring_header(Tag tag, std::uint64_t length) {
  return {length, tag, check_word(tag, length)};
}

std::optional<std::string> ring_header_problem(const RingHeader& header) {
  if (header.check != check_word(header.tag, header.length)) {
    return "a message header whose check word is wrong";
  }
  if (header.tag > kMaxTag) return "a message header with tag " + std::to_string(header.tag);
  if (header.length > kMaxRingMessage) {
    return "a message header announcing " + std::to_string(header.length) + " bytes";
  }
  return std::nullopt;
}

std::size_t MessageRing::footprint(std::size_t capacity) { return kRingControlBytes + capacity; }

MessageRing::MessageRing(Control* control, std::byte* data, std::size_t capacity)
    : control_(control),
      data_(data),
      capacity_(capacity),
      cached_read_(control->read.load(std::memory_order_acquire)),
      read_(cached_read_) {}

MessageRing MessageRing::create(std::byte* memory, std::size_t capacity) {
  static_assert(sizeof(Control) <= kRingControlBytes);
  static_assert(offsetof(Control, written) == kWrittenOffset);
  static_assert(offsetof(Control, read) == kReadOffset);
  if (capacity < 64 || !std::has_single_bit(capacity)) {
    throw std::invalid_argument("a ring's capacity must be a power of two of at least 64");
  }
  auto* control = new (memory) Control{kRingMagic, capacity, {0}, {0}, {0}};
  return MessageRing(control, memory + kRingControlBytes, capacity);
}

MessageRing MessageRing::attach(std::byte* memory, std::size_t capacity) {
  auto* control = std::launder(reinterpret_cast<Control*>(memory));
  if (control->magic != kRingMagic || control->capacity != capacity) {
    throw std::invalid_argument("no message ring of that capacity here");
  }
  return MessageRing(control, memory + kRingControlBytes, capacity);
}

void MessageRing::fail_corrupt(RingWait& wait, std::uint64_t written, std::uint64_t read) const {
  throw CollectiveError(ErrorKind::protocol_violation, wait.site(),
                        "the shared-memory channel's counters are corrupt (written " +
                            std::to_string(written) + ", read " + std::to_string(read) +
                            ", ring of " + format_bytes(capacity_) + ")",
                        "does anything besides this job's ranks write to /dev/shm/rlx-*?");
}

std::uint64_t MessageRing::free_space(std::uint64_t written, std::size_t wanted, RingWait& wait) {
  // Both counters only grow and stay within a ring of each other: anything
  // else (shared memory written by a stranger) would send copies past the ring.
  const auto sane = [&] { return cached_read_ <= written && written - cached_read_ <= capacity_; };
  if (!sane() || capacity_ - (written - cached_read_) < wanted) {
    cached_read_ = control_->read.load(std::memory_order_acquire);
    if (!sane()) fail_corrupt(wait, written, cached_read_);
  }
  return capacity_ - (written - cached_read_);
}

std::uint64_t MessageRing::readable(RingWait& wait) const {
  const std::uint64_t written = control_->written.load(std::memory_order_acquire);
  if (written < read_ || written - read_ > capacity_) fail_corrupt(wait, written, read_);
  return written - read_;
}

bool MessageRing::wait_for_space(std::uint64_t written, std::size_t bytes, RingWait& wait) {
  const auto has_space = [&] { return free_space(written, bytes, wait) >= bytes; };
  if (has_space()) return true;
  const auto stalled = [&] {
    control_->stalled.store(1, std::memory_order_seq_cst);
    wait.before_sleep();
  };
  // Space that is there wins over a stop: a wait ends with what it waited for
  // whenever it can.
  wait_until(
      *wait.own, [&] { return wait.stop() || has_space(); }, wait.until(), wait.policy, stalled);
  return has_space();
}

bool MessageRing::wait_for_data(std::size_t bytes, RingWait& wait) {
  const auto has_data = [&] { return readable(wait) >= bytes; };
  if (has_data()) return true;
  // Data that is there wins over a stop: a peer that closed after its last
  // message still has that message read.
  wait_until(
      *wait.own, [&] { return wait.stop() || has_data(); }, wait.until(), wait.policy);
  return has_data();
}

void MessageRing::copy_in(std::uint64_t at, const std::byte* from, std::size_t bytes) {
  const std::size_t offset = at & (capacity_ - 1);
  const std::size_t first = std::min(bytes, capacity_ - offset);
  std::memcpy(data_ + offset, from, first);
  if (bytes > first) std::memcpy(data_, from + first, bytes - first);
}

void MessageRing::copy_out(std::uint64_t at, std::byte* to, std::size_t bytes) const {
  const std::size_t offset = at & (capacity_ - 1);
  const std::size_t first = std::min(bytes, capacity_ - offset);
  std::memcpy(to, data_ + offset, first);
  if (bytes > first) std::memcpy(to + first, data_, bytes - first);
}

void MessageRing::publish(std::uint64_t written, RingWait& wait) {
  control_->written.store(written, std::memory_order_release);
  wait.other->ring();
}

void MessageRing::release(RingWait& wait) {
  control_->read.store(read_, std::memory_order_release);
  wait.other->ring();
}

bool MessageRing::stream_in(const std::byte* from, std::size_t bytes, RingWait& wait) {
  std::uint64_t written = control_->written.load(std::memory_order_relaxed);
  const std::size_t total = padded(bytes);
  for (std::size_t sent = 0; sent < total;) {
    if (!wait_for_space(written, 8, wait)) return false;
    const std::uint64_t free = free_space(written, std::min(total - sent, piece_limit()), wait);
    const std::size_t piece =
        std::min<std::size_t>({free & ~std::uint64_t{7}, total - sent, piece_limit()});
    const std::size_t real = std::min(piece, bytes > sent ? bytes - sent : 0);
    if (real > 0) copy_in(written, from + sent, real);
    written += piece;  // the padding past the payload is never read
    sent += piece;
    publish(written, wait);
  }
  return true;
}

bool MessageRing::stream_out(std::byte* to, std::size_t bytes, RingWait& wait) {
  const std::size_t total = padded(bytes);
  for (std::size_t got = 0; got < total;) {
    if (!wait_for_data(8, wait)) return false;
    const std::uint64_t available = readable(wait);
    const std::size_t piece = std::min<std::size_t>({available, total - got, piece_limit()});
    const std::size_t real = std::min(piece, bytes > got ? bytes - got : 0);
    if (real > 0) copy_out(read_, to + got, real);
    read_ += piece;
    got += piece;
    release(wait);
  }
  return true;
}

bool MessageRing::send(Tag tag, std::span<const std::byte> payload, RingWait& wait) {
  const RingHeader header = make_ring_header(tag, payload.size());
  const auto* header_bytes = reinterpret_cast<const std::byte*>(&header);
  const std::uint64_t written = control_->written.load(std::memory_order_relaxed);
  const std::size_t total = kHeaderBytes + padded(payload.size());
  if (total <= piece_limit() && free_space(written, total, wait) >= total) {
    // One piece that fits now: one copy, one publish.
    copy_in(written, header_bytes, kHeaderBytes);
    if (!payload.empty()) copy_in(written + kHeaderBytes, payload.data(), payload.size());
    publish(written + total, wait);
    return true;
  }
  if (!wait_for_space(written, kHeaderBytes, wait)) return false;
  copy_in(written, header_bytes, kHeaderBytes);
  publish(written + kHeaderBytes, wait);
  mid_message_ = true;
  if (!stream_in(payload.data(), payload.size(), wait)) return false;
  mid_message_ = false;
  return true;
}

bool MessageRing::producer_stalled() const {
  return control_->stalled.load(std::memory_order_acquire) != 0;
}

void MessageRing::clear_stalled() { control_->stalled.store(0, std::memory_order_seq_cst); }

bool MessageRing::has_message() const {
  return control_->written.load(std::memory_order_acquire) - read_ >= kHeaderBytes;
}

std::optional<RingHeader> MessageRing::take_header(RingWait& wait) {
  if (!wait_for_data(kHeaderBytes, wait)) return std::nullopt;
  RingHeader header;
  copy_out(read_, reinterpret_cast<std::byte*>(&header), kHeaderBytes);
  mid_message_ = true;
  if (auto problem = ring_header_problem(header)) {
    throw CollectiveError(ErrorKind::protocol_violation, wait.site(),
                          "the shared-memory channel holds " + *problem,
                          "is every rank the same rlx build, and does nothing else write to "
                          "/dev/shm/rlx-*?");
  }
  read_ += kHeaderBytes;  // freed with the payload: one release per small message
  return header;
}

bool MessageRing::take_payload(std::span<std::byte> into, RingWait& wait) {
  if (into.empty()) {
    release(wait);
  } else if (!stream_out(into.data(), into.size(), wait)) {
    return false;
  }
  mid_message_ = false;
  return true;
}

}  // namespace rlx::shm
