#include "rlx/transport/collective_stream.h"

#include <stdexcept>

namespace rlx {

CollectiveStream::~CollectiveStream() {
  stop(std::make_exception_ptr(std::runtime_error("the transport was destroyed")));
}

Request CollectiveStream::submit(std::function<void()> work) {
  auto state = std::make_shared<Request::State>();
  std::lock_guard lock(mutex_);
  if (stopping_) {
    state->finish(stop_error_);
    return Request(state);
  }
  queue_.push_back({std::move(work), state});
  if (!thread_.joinable()) thread_ = std::thread([this] { run_jobs(); });
  changed_.notify_all();
  return Request(state);
}

void CollectiveStream::finish_inline() {
  std::lock_guard lock(mutex_);
  running_ = Running::nothing;
  changed_.notify_all();
}

void CollectiveStream::run_jobs() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock,
                  [&] { return stopping_ || (!queue_.empty() && running_ == Running::nothing); });
    if (queue_.empty()) return;  // stopping, and every job failed or ran
    Job job = std::move(queue_.front());
    queue_.pop_front();
    if (stopping_) {
      job.state->finish(stop_error_);
      continue;
    }
    running_ = Running::job;
    lock.unlock();
    std::exception_ptr failure;
    try {
      job.work();
    } catch (...) {
      failure = std::current_exception();
    }
    job.state->finish(failure);
    lock.lock();
    running_ = Running::nothing;
    changed_.notify_all();
  }
}

void CollectiveStream::stop(std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    stop_error_ = std::move(error);
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  for (Job& job : queue_) job.state->finish(stop_error_);
  queue_.clear();
}

}  // namespace rlx
