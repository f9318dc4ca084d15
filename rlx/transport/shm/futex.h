// Waiting on shared memory across processes: a short bounded spin on the
// condition itself (yielding the core when ranks share cores), then the
// kernel's futex wait with the caller's deadline. With 4-8 ranks on 2 cores,
// spinning longer would only take the core from the rank being waited for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "rlx/transport/socket_io.h"

namespace rlx::shm {

struct SpinPolicy {
  std::chrono::microseconds spin{20};  // how long to poll before sleeping in the kernel
  bool yield = false;                  // yield the core on each poll (ranks share cores)
};

// Where one rank's threads sleep, in shared memory; zero-initialised is valid.
// A waiter polls its condition, and only before sleeping counts itself in
// `sleepers`; a publisher that finds no sleeper pays no system call, and the
// waiters never spin on a line that every publisher writes.
struct Doorbell {
  std::atomic<std::uint32_t> sequence{0};  // the futex word: moves on every wake
  std::atomic<std::uint32_t> sleepers{0};

  // After publishing news (any store the waiters poll): wakes whoever sleeps.
  void ring() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    wake_if_sleeping();
  }
  // ring() without its fence, for a publisher ringing several bells after
  // one fence of its own.
  void wake_if_sleeping() {
    if (sleepers.load(std::memory_order_relaxed) > 0) wake();
  }
  // Wakes every sleeper whether or not one was counted (a failure).
  void wake();
};

// Returns once `word` no longer holds `expected` (true) or at `deadline`
// (false), sleeping in slices of at most `slice`.
bool sleep_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                       Deadline deadline, std::chrono::milliseconds slice);

// Relaxes the core between two polls.
void pause_between_polls(const SpinPolicy& policy);

struct NothingBeforeSleep {
  void operator()() const {}
};

// Waits until `ready()` (true) or `deadline` (false); `ready` is polled for
// policy.spin, then the thread sleeps on `bell` until a publisher rings it,
// calling `before_sleep()` before each sleep. Sleeps last at most 100 ms
// each, a backstop for a waker that died between its store and its ring.
template <class Ready, class BeforeSleep = NothingBeforeSleep>
bool wait_until(Doorbell& bell, Ready&& ready, Deadline deadline, const SpinPolicy& policy,
                BeforeSleep&& before_sleep = {}) {
  if (ready()) return true;
  const auto spin_until = Clock::now() + policy.spin;
  for (unsigned polls = 1;; ++polls) {
    pause_between_polls(policy);
    if (ready()) return true;
    if ((polls & 31) == 0 && Clock::now() >= spin_until) break;
  }
  constexpr std::chrono::milliseconds kSlice{100};
  for (;;) {
    before_sleep();
    bell.sleepers.fetch_add(1, std::memory_order_relaxed);
    // Dekker with Doorbell::ring: either the publisher sees this sleeper, or
    // this check sees what it published.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const std::uint32_t seen = bell.sequence.load(std::memory_order_relaxed);
    const bool done = ready();
    const bool expired = !done && Clock::now() >= deadline;
    if (!done && !expired) sleep_while_equal(bell.sequence, seen, deadline, kSlice);
    bell.sleepers.fetch_sub(1, std::memory_order_relaxed);
    if (done) return true;
    if (expired) return ready();
  }
}

}  // namespace rlx::shm
