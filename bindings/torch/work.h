// torch's Work for rlx's calls. Collectives run in the order they were
// called on one thread per process group (WorkQueue), which completes each
// Work and its Future whether or not anyone waits: DDP's reducer chains on
// the Future and only waits at the end of the backward pass. Point-to-point
// calls are rlx requests, posted at once, so a receive never holds the
// collectives behind it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "rlx/transport/request.h"

namespace rlx::torch_backend {

class QueuedWork final : public c10d::Work {
 public:
  // `run` does the call on the queue's thread; `outputs` are what result()
  // and the Future give.
  QueuedWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
             std::function<void()> run);

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // On the queue's thread: runs the call, then completes the Work and the
  // Future with its error, if any.
  void run();

 private:
  std::function<void()> run_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class WorkQueue {
 public:
  WorkQueue();
  // Runs what was queued, then stops the thread.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void push(c10::intrusive_ptr<QueuedWork> work);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<c10::intrusive_ptr<QueuedWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

// A send or receive posted to rlx: wait() is rlx's wait, then `finish`
// (a receive's copy into a tensor that was not contiguous, its length check).
class PointToPointWork final : public c10d::Work {
 public:
  PointToPointWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> tensors,
                   Request request, std::function<void(std::size_t bytes)> finish = {});

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return tensors_; }

 private:
  // Under mutex_: finishes the Work once rlx's request completed.
  void complete_locked();

  std::vector<at::Tensor> tensors_;
  Request request_;
  std::function<void(std::size_t)> finish_;
};

}  // namespace rlx::torch_backend
