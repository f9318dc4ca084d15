// A deadline for calls that cannot be interrupted.
//
// MPI's blocking collectives cannot be cancelled, so a rank whose peer never
// arrives would wait forever. The watchdog is one long-lived thread per
// transport that looks at the call in progress a few times per deadline; when
// the same call has been running for longer than the timeout it hands the
// call to `on_expiry` (which, for MPI, reports the error and aborts the job).
//
// Arming is on the hot path of every collective, so it is a few plain stores
// and never a system call: arm() does not wake the thread or read the clock.
// The thread notes when it first sees a call and fires once that call is still
// the one in progress a timeout later, so a stuck call is reported between
// 1 and 1 + 2/kChecksPerTimeout timeouts after it started.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

#include "rlx/collectives/links.h"

namespace rlx::mpi {

// The call being watched, for the message when its deadline passes: a
// collective, or (setup) joining the communicator.
struct WatchedCall {
  CollectiveCall call;
  bool setup = false;
};

class Watchdog {
 public:
  // Called on the watchdog's thread with the expired call and how long it had
  // been seen running. It may not return (MPI_Abort); if it does, the
  // watchdog stops watching.
  using Expired = std::function<void(const WatchedCall&, std::chrono::milliseconds waited)>;
  // Called on the watchdog's thread every kStuckPeriod while the call in
  // progress has been running for more than half the timeout: the MPI
  // transport answers other ranks' liveness probes then.
  using Stuck = std::function<void()>;
  static constexpr std::chrono::milliseconds kStuckPeriod{10};

  Watchdog(std::chrono::milliseconds timeout, Expired on_expiry, Stuck while_stuck = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts watching `call`. One call at a time: arm and disarm come from the
  // thread that runs the collectives. Inline: they are on every collective's path.
  void arm(const WatchedCall& call) noexcept {
    std::atomic_thread_fence(std::memory_order_release);
    packed_kind_.store(pack(call), std::memory_order_relaxed);
    count_.store(call.call.count, std::memory_order_relaxed);
    sequence_.store(call.call.sequence, std::memory_order_relaxed);
    armed_.store(++next_generation_, std::memory_order_release);
  }
  void disarm() noexcept { armed_.store(0, std::memory_order_release); }

  // Stops and joins the thread; later arms are ignored. Idempotent.
  void stop();

 private:
  static constexpr int kChecksPerTimeout = 10;

  struct Snapshot {
    std::uint64_t generation = 0;  // 0: nothing armed
    WatchedCall call;
  };
  Snapshot read() const noexcept;
  static std::uint64_t pack(const WatchedCall& call) noexcept {
    return static_cast<std::uint64_t>(call.call.kind) |
           static_cast<std::uint64_t>(call.call.op) << 8 |
           static_cast<std::uint64_t>(call.call.dtype) << 16 |
           static_cast<std::uint64_t>(call.setup) << 24;
  }
  void run();

  const std::chrono::milliseconds timeout_;
  const Expired on_expiry_;
  const Stuck while_stuck_;
  // A sequence lock: the fields below are written between a release fence and
  // the release store of armed_; the reader checks armed_ did not change.
  std::atomic<std::uint64_t> armed_{0};
  std::atomic<std::uint64_t> packed_kind_{0};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sequence_{0};
  std::uint64_t next_generation_ = 0;  // only the arming thread touches it

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// Arms a watchdog for one scope.
class WatchedScope {
 public:
  WatchedScope(Watchdog& watchdog, const WatchedCall& call) noexcept : watchdog_(watchdog) {
    watchdog_.arm(call);
  }
  ~WatchedScope() { watchdog_.disarm(); }
  WatchedScope(const WatchedScope&) = delete;
  WatchedScope& operator=(const WatchedScope&) = delete;

 private:
  Watchdog& watchdog_;
};

}  // namespace rlx::mpi
