#include "bindings/torch/point_to_point_work.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>

#include <c10/util/Exception.h>

namespace rlx::torch_backend {
namespace {

// A request whose Work Python let go of first, with the buffers rlx still
// reads or writes. Never destroyed before it completes: at exit, left be.
struct Orphan {
  Request request;
  std::vector<at::Tensor> buffers;
  std::function<void(std::size_t)> finish;
};

struct Orphanage {
  std::mutex mutex;
  std::vector<Orphan> orphans;
};

Orphanage& orphanage() {
  static auto* instance = new Orphanage;  // outlives every Work, at exit too
  return *instance;
}

bool completed(const Request& request) {
  try {
    return request.test();
  } catch (...) {
    return true;  // failed: done with its buffers
  }
}

}  // namespace

void reap_orphans() {
  std::vector<Orphan> done;
  {
    Orphanage& o = orphanage();
    std::lock_guard lock(o.mutex);
    auto alive = std::partition(o.orphans.begin(), o.orphans.end(),
                                [](const Orphan& orphan) { return !completed(orphan.request); });
    std::move(alive, o.orphans.end(), std::back_inserter(done));
    o.orphans.erase(alive, o.orphans.end());
  }
  // `done`'s tensors go here, outside the lock.
}

PointToPointWork::PointToPointWork(int rank, c10d::OpType type, const char* title,
                                   std::vector<at::Tensor> result, std::vector<at::Tensor> buffers,
                                   Request request, std::function<void(std::size_t)> finish)
    : Work(rank, type, title),
      result_(std::move(result)),
      buffers_(std::move(buffers)),
      request_(std::move(request)),
      finish_(std::move(finish)) {}

PointToPointWork::~PointToPointWork() {
  std::lock_guard lock(mutex_);
  if (completed_ || advance_locked(/*block=*/false)) return;
  Orphanage& o = orphanage();
  std::lock_guard orphans_lock(o.mutex);
  o.orphans.push_back({std::move(request_), std::move(buffers_), std::move(finish_)});
}

bool PointToPointWork::advance_locked(bool block) {
  if (completed_) return true;
  std::exception_ptr failure;
  try {
    if (block) {
      request_.wait();
    } else if (!request_.test()) {
      return false;
    }
    if (finish_) finish_(request_.bytes());
  } catch (...) {
    failure = std::current_exception();
  }
  completed_ = true;
  exception_ = failure;
  finish_ = nullptr;
  buffers_.clear();
  return true;
}

bool PointToPointWork::isCompleted() {
  // A wait() holds the lock while it blocks: not completed yet, then.
  std::unique_lock lock(mutex_, std::try_to_lock);
  return lock && advance_locked(/*block=*/false);
}

bool PointToPointWork::isSuccess() const {
  std::unique_lock lock(mutex_, std::try_to_lock);
  return lock && completed_ && !exception_;
}

std::exception_ptr PointToPointWork::exception() const {
  std::unique_lock lock(mutex_, std::try_to_lock);
  return lock ? exception_ : nullptr;
}

bool PointToPointWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (timeout == kNoTimeout) {
    advance_locked(/*block=*/true);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::microseconds(50);
    while (!advance_locked(/*block=*/false)) {
      TORCH_CHECK(std::chrono::steady_clock::now() < deadline,
                  "rlx: ", opType_ == c10d::OpType::SEND ? "send" : "recv",
                  " did not complete within wait()'s timeout of ", timeout.count(), " ms");
      lock.unlock();
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
      lock.lock();
    }
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

}  // namespace rlx::torch_backend
