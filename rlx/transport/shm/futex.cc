#include "rlx/transport/shm/futex.h"

#include <algorithm>
#include <climits>

#include <immintrin.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace rlx::shm {
namespace {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "futexes need a plain, lock-free 32-bit word");

std::uint32_t* raw(const std::atomic<std::uint32_t>& word) {
  return reinterpret_cast<std::uint32_t*>(const_cast<std::atomic<std::uint32_t>*>(&word));
}

// Shared (not FUTEX_PRIVATE_FLAG): the waiters are other processes.
long futex(std::uint32_t* address, int op, std::uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, address, op, value, timeout, nullptr, 0);
}

}  // namespace

void Doorbell::wake() {
  sequence.fetch_add(1, std::memory_order_seq_cst);
  futex(raw(sequence), FUTEX_WAKE, INT_MAX, nullptr);
}

bool sleep_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       Deadline deadline, std::chrono::milliseconds slice) {
  const auto now = Clock::now();
  if (now >= deadline) return false;
  const auto left = std::min<Clock::duration>(deadline - now, slice);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
  const timespec timeout{static_cast<time_t>(ns / 1'000'000'000),
                         static_cast<long>(ns % 1'000'000'000)};
  // EAGAIN (the word moved before the kernel looked), EINTR and ETIMEDOUT all
  // mean: look again.
  futex(raw(word), FUTEX_WAIT, expected, &timeout);
  return word.load(std::memory_order_acquire) != expected;
}

void pause_between_polls(const SpinPolicy& policy) {
  if (policy.yield) {
    std::this_thread::yield();
  } else {
    _mm_pause();
  }
}

}  // namespace rlx::shm
