// torch's Work for a group's collectives: they run in the order they were
// called, one at a time, on the group's serving thread (WorkQueue), which
// completes each Work and its Future whether or not anyone waits. A
// Future's callbacks run on the thread that completed it; when a callback
// may hold the serving thread (PowerSGD's hook starts and waits for further
// calls), another thread takes over serving, so the calls behind it still run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

namespace rlx::torch_backend {

struct QueueState;

class QueuedWork final : public c10d::Work {
 public:
  // `run` does the call; `outputs` are what result() and the Future give.
  QueuedWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> outputs,
             std::function<void()> run);

  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  // A wait without a timeout, on a call that has not started, next in line
  // and with nothing running, runs it on the waiting thread: a blocking call
  // costs no hand-off between threads.
  bool wait(std::chrono::milliseconds timeout) override;

  // Runs the call and completes the Work with its error, if any.
  void run();
  // Then completes the Future, running its callbacks on this thread.
  void complete_future();

 private:
  friend class WorkQueue;
  friend struct QueueState;
  std::function<void()> run_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::exception_ptr failure_;
  std::shared_ptr<QueueState> queue_;  // set by WorkQueue::push
};

// What the serving threads and the waiting threads share: a Work may
// outlive its process group, and its wait() still looks here.
struct QueueState {
  std::mutex mutex;
  std::condition_variable work_ready;  // for the serving threads
  std::condition_variable idle;        // for stop() and wait_for_every_group()
  std::deque<c10::intrusive_ptr<QueuedWork>> queue;
  bool running = false;  // a call runs, on a serving thread or a waiter's
  bool stopping = false;
  std::uint64_t server = 0;           // which thread serves (the others are spares)
  std::uint64_t next_id = 0;          // for the next thread started
  std::vector<std::uint64_t> spares;  // threads parked, free to serve
  int threads = 0;                    // alive, serving or spare
  bool server_in_callbacks = false;   // the serving thread, not a replaced one
  int in_callbacks = 0;               // threads running a Future's callbacks

  // Takes the next call when nothing runs, under `mutex`.
  c10::intrusive_ptr<QueuedWork> take_locked();
  // Runs `work` (taken) and lets the next one start, then its Future's callbacks.
  void run(c10::intrusive_ptr<QueuedWork> work);
  // Under `mutex`: a spare, or a new thread, serves from now on.
  void hand_over_locked(const std::shared_ptr<QueueState>& self);
  // True once nothing is queued, running or in callbacks.
  bool idle_locked() const { return queue.empty() && !running && in_callbacks == 0; }
};

class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue() { stop(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void push(c10::intrusive_ptr<QueuedWork> work);
  // Runs what was queued and waits for its callbacks, then ends the threads
  // (once). From inside one of the queue's calls (the group's last
  // reference dropped there), runs the rest right there; from inside
  // callbacks, waits for all but its own; a serving thread doing so ends by
  // itself once back in its loop.
  void stop();

 private:
  std::shared_ptr<QueueState> state_ = std::make_shared<QueueState>();
  bool stopped_ = false;
};

// Waits until every group's calls and their callbacks have run: rlx_torch's
// atexit, so that no call still running drops a tensor Python owns after
// Python can no longer give the GIL (which aborts the process, as gloo's
// threads do at torch 1.13's exit).
void wait_for_every_group();

}  // namespace rlx::torch_backend
