#include "transport/request.h"

namespace rlx {

void Request::State::finish(std::exception_ptr failure, std::size_t transferred) {
  {
    std::lock_guard lock(mutex);
    error = std::move(failure);
    bytes = transferred;
    done = true;
  }
  completed.notify_all();
}

bool Request::State::finished() {
  std::lock_guard lock(mutex);
  return done;
}

void Request::wait() const {
  if (!state_) return;
  if (state_->progress && !state_->finished()) state_->progress(*state_, true);
  std::unique_lock lock(state_->mutex);
  state_->completed.wait(lock, [&] { return state_->done; });
  if (state_->error) std::rethrow_exception(state_->error);
}

bool Request::test() const {
  if (!state_) return true;
  if (state_->progress && !state_->finished()) state_->progress(*state_, false);
  std::lock_guard lock(state_->mutex);
  if (state_->done && state_->error) std::rethrow_exception(state_->error);
  return state_->done;
}

std::size_t Request::bytes() const {
  if (!state_) return 0;
  std::lock_guard lock(state_->mutex);
  return state_->bytes;
}

void wait_all(std::span<const Request> requests) {
  std::exception_ptr first;
  for (const Request& request : requests) {
    try {
      request.wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace rlx
