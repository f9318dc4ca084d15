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

WorkQueue::WorkQueue() : thread_([this] { loop(); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

void WorkQueue::push(c10::intrusive_ptr<QueuedWork> work) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(work));
  }
  ready_.notify_one();
}

void WorkQueue::loop() {
  for (;;) {
    c10::intrusive_ptr<QueuedWork> work;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work->run();
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
