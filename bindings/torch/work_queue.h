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
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "rlx/transport/request.h"

namespace rlx::torch_backend {

class WorkQueue;

class QueuedWork final : public c10d::Work {
 public:
  // `run` does the call; `outputs` are what result() and the Future give.
  QueuedWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
             std::function<void()> run);

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // A wait on a call that has not started, next in line and with nothing
  // running, runs it on the waiting thread: a blocking call costs no hand-off
  // between threads.
  bool wait(std::chrono::milliseconds timeout) override;

  // Runs the call, then completes the Work and the Future with its error,
  // if any.
  void run();

 private:
  friend class WorkQueue;
  std::function<void()> run_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<struct QueueState> queue_;  // set by WorkQueue::push
};

// What the queue's thread and the waiting threads share: a Work may outlive
// its process group, and its wait() still looks here.
struct QueueState {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<c10::intrusive_ptr<QueuedWork>> queue;
  bool running = false;  // a call is running, on the queue's thread or a waiter's
  bool stopping = false;

  // Takes the next call when nothing runs, under `mutex`.
  c10::intrusive_ptr<QueuedWork> take_locked();
  // Runs `work` (taken), then lets the next one start.
  void run(const c10::intrusive_ptr<QueuedWork>& work);
};

class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue() { stop(); }
  // Runs what was queued, then stops the thread (once).
  void stop();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void push(c10::intrusive_ptr<QueuedWork> work);

 private:
  void loop();

  std::shared_ptr<QueueState> state_ = std::make_shared<QueueState>();
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
