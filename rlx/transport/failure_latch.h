// The first fatal error of a transport. Once tripped, every wait wakes (the
// eventfd becomes readable) and every later operation rethrows the error: a
// transport that lost a peer or timed out mid-collective has streams in an
// unknown state, so it is not used again.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>

#include "rlx/transport/errors.h"

namespace rlx {

class FailureLatch {
 public:
  FailureLatch();
  ~FailureLatch();
  FailureLatch(const FailureLatch&) = delete;
  FailureLatch& operator=(const FailureLatch&) = delete;

  // Records `error` unless an earlier one is recorded; true if this one was.
  bool trip(std::exception_ptr error);
  bool tripped() const { return tripped_.load(std::memory_order_acquire); }
  void rethrow_if_tripped() const;
  // The same, reported where `site`'s operation met the failure (its own
  // operation and sizes, CollectiveError::seen_from), when it is a CollectiveError.
  void rethrow_if_tripped(const ErrorSite& site) const;
  // Readable once tripped: put it in every poll().
  int wake_fd() const { return wake_fd_; }
  // Called once tripped (at once if it is already), for waits that sleep
  // elsewhere than in poll() (futexes in shared memory). An empty function
  // removes it; it is never called after set_waker returns.
  void set_waker(std::function<void()> waker);

 private:
  int wake_fd_;
  std::atomic<bool> tripped_{false};
  mutable std::mutex mutex_;
  std::exception_ptr error_;
  std::mutex waker_mutex_;
  std::function<void()> waker_;
};

}  // namespace rlx
