#include "rlx/transport/request.h"

#include <string>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

// Throws `error` as a copy built on this thread. The original stays in the
// operation's state, which the thread that ran the operation may release
// last, destroying the exception after this thread read it; libstdc++
// orders that through reference counts ThreadSanitizer cannot see. The
// copy is this thread's alone; the original is read only while this thread
// still holds the state.
[[noreturn]] void rethrow_own_copy(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const CollectiveError& failure) {
    throw CollectiveError(failure.kind(), failure.site(), failure.detail(), failure.hint());
  } catch (const Error& failure) {
    throw Error(std::string(failure.what()));
  }
}

}  // namespace

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
  if (state_->error) rethrow_own_copy(state_->error);
}

bool Request::test() const {
  if (!state_) return true;
  if (state_->progress && !state_->finished()) state_->progress(*state_, false);
  std::lock_guard lock(state_->mutex);
  if (state_->done && state_->error) rethrow_own_copy(state_->error);
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
