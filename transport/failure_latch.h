// The first fatal error of a transport. Once tripped, every wait wakes (the
// eventfd becomes readable) and every later operation rethrows the error: a
// transport that lost a peer or timed out mid-collective has streams in an
// unknown state, so it is not used again.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>

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
  // Readable once tripped: put it in every poll().
  int wake_fd() const { return wake_fd_; }

 private:
  int wake_fd_;
  std::atomic<bool> tripped_{false};
  mutable std::mutex mutex_;
  std::exception_ptr error_;
};

}  // namespace rlx
