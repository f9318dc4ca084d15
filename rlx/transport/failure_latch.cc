#include "rlx/transport/failure_latch.h"

#include <cerrno>
#include <cstdint>
#include <stdexcept>

#include <sys/eventfd.h>
#include <unistd.h>

namespace rlx {

FailureLatch::FailureLatch() : wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (wake_fd_ < 0 && is_out_of_descriptors(errno)) {
    throw out_of_descriptors({.operation = "set up a group"}, "the failure latch's eventfd", errno);
  }
  if (wake_fd_ < 0) throw std::runtime_error("eventfd failed");
}

FailureLatch::~FailureLatch() { ::close(wake_fd_); }

bool FailureLatch::trip(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (error_) return false;
    error_ = std::move(error);
    tripped_.store(true, std::memory_order_release);
  }
  const std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  std::lock_guard lock(waker_mutex_);
  if (waker_) waker_();
  return true;
}

void FailureLatch::set_waker(std::function<void()> waker) {
  std::lock_guard lock(waker_mutex_);
  waker_ = std::move(waker);
  if (waker_ && tripped()) waker_();
}

void FailureLatch::rethrow_if_tripped(const ErrorSite& site) const {
  if (!tripped()) return;
  try {
    rethrow_if_tripped();
  } catch (const CollectiveError& cause) {
    throw cause.seen_from(site);
  }
}

void FailureLatch::rethrow_if_tripped() const {
  if (!tripped()) return;
  std::lock_guard lock(mutex_);
  std::rethrow_exception(error_);
}

}  // namespace rlx
