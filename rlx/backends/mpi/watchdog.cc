#include "rlx/backends/mpi/watchdog.h"

#include <algorithm>

namespace rlx::mpi {
namespace {

using Clock = std::chrono::steady_clock;

WatchedCall unpack(std::uint64_t packed, std::uint64_t count, std::uint64_t sequence) {
  return {.call = {.kind = static_cast<CollectiveKind>(packed & 0xff),
                   .op = static_cast<ReduceOp>((packed >> 8) & 0xff),
                   .dtype = static_cast<Dtype>((packed >> 16) & 0xff),
                   .count = count,
                   .sequence = sequence},
          .setup = ((packed >> 24) & 1) != 0};
}

}  // namespace

Watchdog::Watchdog(std::chrono::milliseconds timeout, Expired on_expiry, Stuck while_stuck)
    : timeout_(timeout),
      on_expiry_(std::move(on_expiry)),
      while_stuck_(std::move(while_stuck)),
      thread_([this] { run(); }) {}

Watchdog::~Watchdog() { stop(); }

Watchdog::Snapshot Watchdog::read() const noexcept {
  const std::uint64_t generation = armed_.load(std::memory_order_acquire);
  if (generation == 0) return {};
  const std::uint64_t packed = packed_kind_.load(std::memory_order_relaxed);
  const std::uint64_t count = count_.load(std::memory_order_relaxed);
  const std::uint64_t sequence = sequence_.load(std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (armed_.load(std::memory_order_relaxed) != generation) return {};  // changed while reading
  return {generation, unpack(packed, count, sequence)};
}

void Watchdog::run() {
  const auto calm =
      std::max<Clock::duration>(timeout_ / kChecksPerTimeout, std::chrono::milliseconds(1));
  auto period = calm;
  std::uint64_t watching = 0;
  Clock::time_point first_seen;
  std::unique_lock lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const Snapshot now_running = read();
    const auto now = Clock::now();
    period = calm;
    if (now_running.generation != watching) {
      watching = now_running.generation;
      first_seen = now;
      continue;
    }
    if (watching == 0) continue;
    const auto running = now - first_seen;
    if (running >= timeout_) {
      lock.unlock();
      on_expiry_(now_running.call, std::chrono::duration_cast<std::chrono::milliseconds>(running));
      return;
    }
    if (while_stuck_ && running >= timeout_ / 2) {
      period = std::min<Clock::duration>(calm, kStuckPeriod);
      lock.unlock();
      while_stuck_();
      lock.lock();
    }
  }
}

void Watchdog::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

}  // namespace rlx::mpi
