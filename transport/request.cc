#include "transport/request.h"

namespace rlx {

void Request::State::finish(std::exception_ptr failure) {
  {
    std::lock_guard lock(mutex);
    error = std::move(failure);
    done = true;
  }
  completed.notify_all();
}

void Request::wait() const {
  if (!state_) return;
  std::unique_lock lock(state_->mutex);
  state_->completed.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Request::test() const {
  if (!state_) return true;
  std::lock_guard lock(state_->mutex);
  if (state_->done && state_->error) std::rethrow_exception(state_->error);
  return state_->done;
}

}  // namespace rlx
