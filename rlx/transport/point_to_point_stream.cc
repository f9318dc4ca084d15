#include "rlx/transport/point_to_point_stream.h"

#include <stdexcept>

namespace rlx {

PointToPointStream::~PointToPointStream() {
  stop(std::make_exception_ptr(std::runtime_error("the transport was destroyed")));
}

Request PointToPointStream::post(Key key, std::function<std::size_t()> work) {
  auto state = std::make_shared<Request::State>();
  std::lock_guard lock(mutex_);
  if (stopping_) {
    state->finish(stop_error_);
    return Request(state);
  }
  Queue& queue = queues_[key];
  queue.jobs.push_back({std::move(work), state});
  unfinished_.fetch_add(1, std::memory_order_acq_rel);
  if (queue.jobs.size() == 1) {
    ready_.push_back(key);
    // Idle workers not yet woken count for keys already ready.
    if (ready_.size() > idle_ && workers_.size() < kMaxWorkers) {
      workers_.emplace_back([this] { serve(); });
    }
    changed_.notify_one();
  }
  return Request(state);
}

bool PointToPointStream::has_posted(Key key) {
  std::lock_guard lock(mutex_);
  return queues_.contains(key);
}

void PointToPointStream::serve() {
  std::unique_lock lock(mutex_);
  for (;;) {
    ++idle_;
    changed_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
    --idle_;
    if (ready_.empty()) return;  // stopping, and nothing is left to run
    const Key key = ready_.front();
    ready_.pop_front();
    drain(lock, key);
  }
}

void PointToPointStream::drain(std::unique_lock<std::mutex>& lock, Key key) {
  for (;;) {
    const auto found = queues_.find(key);
    if (found == queues_.end()) return;  // stop failed what was left
    Queue& queue = found->second;
    queue.running = true;
    Job job = std::move(queue.jobs.front());
    lock.unlock();
    std::size_t bytes = 0;
    std::exception_ptr failure;
    try {
      bytes = job.work();
    } catch (...) {
      failure = std::current_exception();
    }
    job.state->finish(failure, bytes);
    lock.lock();
    unfinished_.fetch_sub(1, std::memory_order_acq_rel);
    Queue& same = queues_.at(key);  // stop leaves a running key's queue in place
    same.running = false;
    same.jobs.pop_front();
    if (same.jobs.empty()) {
      queues_.erase(key);
      return;
    }
  }
}

void PointToPointStream::stop(std::exception_ptr error) {
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    stop_error_ = error;
    ready_.clear();
    for (auto it = queues_.begin(); it != queues_.end();) {
      Queue& queue = it->second;
      const std::size_t keep = queue.running ? 1 : 0;
      while (queue.jobs.size() > keep) {
        queue.jobs.back().state->finish(error);
        queue.jobs.pop_back();
        unfinished_.fetch_sub(1, std::memory_order_acq_rel);
      }
      it = queue.jobs.empty() ? queues_.erase(it) : std::next(it);
    }
    workers.swap(workers_);
    changed_.notify_all();
  }
  for (std::thread& worker : workers) worker.join();
}

}  // namespace rlx
