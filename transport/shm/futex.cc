#include "transport/shm/futex.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <thread>

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

bool wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      Deadline deadline, SpinPolicy policy) {
  const auto spin_until = Clock::now() + policy.spin;
  while (word.load(std::memory_order_acquire) == expected) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (now < spin_until) {
      if (policy.yield) std::this_thread::yield();
      continue;
    }
    // Sleep in slices of at most a second, so a missed wake-up (a waker that
    // changed the word between our load and the futex call is not one: the
    // kernel compares first) only costs time, never the deadline.
    const auto left = std::min<Clock::duration>(deadline - now, std::chrono::seconds(1));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec timeout{static_cast<time_t>(ns / 1'000'000'000),
                           static_cast<long>(ns % 1'000'000'000)};
    futex(raw(word), FUTEX_WAIT, expected, &timeout);  // EAGAIN, EINTR, ETIMEDOUT: look again
  }
  return true;
}

void wake_all(std::atomic<std::uint32_t>& word) { futex(raw(word), FUTEX_WAKE, INT_MAX, nullptr); }

}  // namespace rlx::shm
