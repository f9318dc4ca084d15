#include "bindings/torch/work.h"

#include <ATen/core/ivalue.h>

namespace rlx::torch_backend {

QueuedWork::QueuedWork(int rank, c10d::OpType type, const char* title,
                       std::vector<at::Tensor> outputs, std::function<void()> run)
    : Work(rank, type, title),
      run_(std::move(run)),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void QueuedWork::run() {
  std::exception_ptr failure;
  try {
    run_();
  } catch (...) {
    failure = std::current_exception();
  }
  run_ = nullptr;  // the tensors it holds go with the call
  finish(failure);
  if (failure) {
    future_->setError(failure);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool QueuedWork::wait(std::chrono::milliseconds timeout) {
  if (queue_) {
    c10::intrusive_ptr<QueuedWork> mine;
    {
      std::lock_guard lock(queue_->mutex);
      if (!queue_->running && !queue_->queue.empty() && queue_->queue.front().get() == this)
        mine = queue_->take_locked();
    }
    if (mine) queue_->run(mine);
  }
  return Work::wait(timeout);
}

c10::intrusive_ptr<QueuedWork> QueueState::take_locked() {
  c10::intrusive_ptr<QueuedWork> work = std::move(queue.front());
  queue.pop_front();
  running = true;
  return work;
}

void QueueState::run(const c10::intrusive_ptr<QueuedWork>& work) {
  work->run();
  {
    std::lock_guard lock(mutex);
    running = false;
  }
  ready.notify_all();
}

WorkQueue::WorkQueue() : thread_([this] { loop(); }) {}

void WorkQueue::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->ready.notify_all();
  thread_.join();
}

void WorkQueue::push(c10::intrusive_ptr<QueuedWork> work) {
  work->queue_ = state_;
  {
    std::lock_guard lock(state_->mutex);
    state_->queue.push_back(std::move(work));
  }
  state_->ready.notify_all();
}

// Stops once stopping and nothing is queued or running (a waiter may be
// running the last call).
void WorkQueue::loop() {
  QueueState& s = *state_;
  for (;;) {
    c10::intrusive_ptr<QueuedWork> work;
    {
      std::unique_lock lock(s.mutex);
      s.ready.wait(lock, [&] { return !s.running && (s.stopping || !s.queue.empty()); });
      if (s.queue.empty()) return;
      work = s.take_locked();
    }
    s.run(work);
  }
}

PointToPointWork::PointToPointWork(int rank, c10d::OpType type, const char* title,
                                   std::vector<at::Tensor> tensors, Request request,
                                   std::function<void(std::size_t)> finish)
    : Work(rank, type, title),
      tensors_(std::move(tensors)),
      request_(std::move(request)),
      finish_(std::move(finish)) {}

void PointToPointWork::complete_locked() {
  std::exception_ptr failure;
  try {
    request_.wait();
    if (finish_) finish_(request_.bytes());
  } catch (...) {
    failure = std::current_exception();
  }
  completed_ = true;
  exception_ = failure;
  finish_ = nullptr;
}

bool PointToPointWork::isCompleted() {
  std::lock_guard lock(mutex_);
  if (completed_) return true;
  bool done = false;
  try {
    done = request_.test();
  } catch (...) {
    done = true;
  }
  if (done) complete_locked();
  return completed_;
}

bool PointToPointWork::isSuccess() const {
  std::lock_guard lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr PointToPointWork::exception() const {
  std::lock_guard lock(mutex_);
  return exception_;
}

// rlx's own deadline bounds the wait; torch's timeout argument is not a
// second one.
bool PointToPointWork::wait(std::chrono::milliseconds) {
  std::lock_guard lock(mutex_);
  if (!completed_) complete_locked();
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

}  // namespace rlx::torch_backend
