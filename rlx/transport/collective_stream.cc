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
  jobs_.fetch_add(1);
  if (!thread_.joinable()) thread_ = std::thread([this] { run_jobs(); });
  changed_.notify_all();
  return Request(state);
}

CollectiveStream::Turn CollectiveStream::take_turn() {
  if (jobs_.load() == 0) {
    bool idle = false;
    if (!inline_running_.compare_exchange_strong(idle, true)) return Turn::refused;
    // A job queued since: it was issued first and runs first.
    if (jobs_.load() == 0) return Turn::now;
    finish_inline();
  }
  std::lock_guard lock(mutex_);
  // Another thread's blocking call is refused even with jobs queued: queued
  // behind it, this one's order against the other ranks' would be a guess.
  if (inline_running_.load()) return Turn::refused;
  if (jobs_.load() > 0) return Turn::after_queue;
  bool idle = false;
  return inline_running_.compare_exchange_strong(idle, true) ? Turn::now : Turn::refused;
}

void CollectiveStream::finish_inline() {
  inline_running_.store(false);
  // The job thread may wait for this call: it waits under the lock, so
  // taking it before the notification loses none.
  if (jobs_.load() == 0) return;
  std::lock_guard lock(mutex_);
  changed_.notify_all();
}

void CollectiveStream::run_jobs() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !inline_running_.load()); });
    if (queue_.empty()) return;  // stopping, and every job failed or ran
    Job job = std::move(queue_.front());
    queue_.pop_front();
    if (stopping_) {
      job.state->finish(stop_error_);
      jobs_.fetch_sub(1);
      continue;
    }
    lock.unlock();
    std::exception_ptr failure;
    try {
      job.work();
    } catch (...) {
      failure = std::current_exception();
    }
    job.state->finish(failure);
    lock.lock();
    jobs_.fetch_sub(1);
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
  jobs_.fetch_sub(queue_.size());
  queue_.clear();
}

}  // namespace rlx
