#include "bindings/torch/work_queue.h"

#include <algorithm>
#include <thread>

#include <ATen/core/ivalue.h>

namespace rlx::torch_backend {
namespace {

// The queue the calling thread serves, if it is a serving thread.
thread_local const QueueState* serving = nullptr;

// A serving thread: runs calls while it is the server; parked as a spare
// while another serves; ends when the queue stops.
void serve(std::shared_ptr<QueueState> state, std::uint64_t id) {
  QueueState& s = *state;
  serving = &s;
  std::unique_lock lock(s.mutex);
  for (;;) {
    // Replaced while in callbacks: parked, free to serve again.
    if (s.server != id && std::find(s.spares.begin(), s.spares.end(), id) == s.spares.end())
      s.spares.push_back(id);
    s.work_ready.wait(
        lock, [&] { return s.stopping || (s.server == id && !s.running && !s.queue.empty()); });
    if (s.stopping) break;
    c10::intrusive_ptr<QueuedWork> work = s.take_locked();
    lock.unlock();
    s.run(std::move(work));
    lock.lock();
  }
  --s.threads;
  s.idle.notify_all();
}

// Every group's queue, for wait_for_every_group.
struct Registry {
  std::mutex mutex;
  std::vector<std::weak_ptr<QueueState>> queues;
};

Registry& registry() {
  static auto* instance = new Registry;  // used at exit
  return *instance;
}

}  // namespace

QueuedWork::QueuedWork(int rank, c10d::OpType type, const char* title,
                       std::vector<at::Tensor> outputs, std::function<void()> run)
    : Work(rank, type, title),
      run_(std::move(run)),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void QueuedWork::run() {
  try {
    run_();
  } catch (...) {
    failure_ = std::current_exception();
  }
  run_ = nullptr;  // the tensors it holds go with the call
  finish(failure_);
}

void QueuedWork::complete_future() {
  if (failure_) {
    future_->setError(failure_);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool QueuedWork::wait(std::chrono::milliseconds timeout) {
  if (queue_ && timeout == kNoTimeout) {
    c10::intrusive_ptr<QueuedWork> mine;
    {
      std::lock_guard lock(queue_->mutex);
      if (!queue_->running && !queue_->queue.empty() && queue_->queue.front().get() == this)
        mine = queue_->take_locked();
    }
    if (mine) queue_->run(std::move(mine));
  }
  return Work::wait(timeout);
}

c10::intrusive_ptr<QueuedWork> QueueState::take_locked() {
  c10::intrusive_ptr<QueuedWork> work = std::move(queue.front());
  queue.pop_front();
  running = true;
  return work;
}

void QueueState::run(c10::intrusive_ptr<QueuedWork> work) {
  work->run();
  const bool serves = serving == this;
  {
    std::lock_guard lock(mutex);
    running = false;
    ++in_callbacks;
    // Callbacks may wait for a call queued now or later: one queued now
    // gets another server at once, a later one when it is pushed.
    if (serves) {
      server_in_callbacks = true;
      if (!queue.empty()) hand_over_locked(work->queue_);
    }
    if (!queue.empty()) work_ready.notify_all();
  }
  work->complete_future();
  work.reset();  // what it held goes before the queue may say it is idle
  std::lock_guard lock(mutex);
  --in_callbacks;
  if (serves) server_in_callbacks = false;
  if (idle_locked()) idle.notify_all();
}

void QueueState::hand_over_locked(const std::shared_ptr<QueueState>& self) {
  server_in_callbacks = false;
  if (!spares.empty()) {
    server = spares.back();
    spares.pop_back();
  } else {
    server = ++next_id;
    ++threads;
    std::thread(serve, self, server).detach();
  }
  work_ready.notify_all();
}

WorkQueue::WorkQueue() {
  {
    std::lock_guard lock(state_->mutex);
    state_->server = ++state_->next_id;
    state_->threads = 1;
  }
  std::thread(serve, state_, state_->server).detach();
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::erase_if(r.queues, [](const std::weak_ptr<QueueState>& q) { return q.expired(); });
  r.queues.push_back(state_);
}

void WorkQueue::push(c10::intrusive_ptr<QueuedWork> work) {
  work->queue_ = state_;
  std::lock_guard lock(state_->mutex);
  state_->queue.push_back(std::move(work));
  // The server's callbacks may be waiting for this very call.
  if (state_->server_in_callbacks) state_->hand_over_locked(state_);
  state_->work_ready.notify_all();
}

void WorkQueue::stop() {
  if (stopped_) return;
  stopped_ = true;
  QueueState& s = *state_;
  std::unique_lock lock(s.mutex);
  if (serving == &s) {
    // Inside a call or its callbacks, on a serving thread: the rest runs here.
    while (!s.queue.empty()) {
      c10::intrusive_ptr<QueuedWork> work = std::move(s.queue.front());
      s.queue.pop_front();
      lock.unlock();
      work->run();
      work->complete_future();
      work.reset();
      lock.lock();
    }
    s.stopping = true;
    s.work_ready.notify_all();
    return;  // this thread ends when it is back in its loop
  }
  s.idle.wait(lock, [&] { return s.idle_locked(); });
  s.stopping = true;
  s.work_ready.notify_all();
  s.idle.wait(lock, [&] { return s.threads == 0; });
}

void wait_for_every_group() {
  std::vector<std::shared_ptr<QueueState>> live;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (const auto& queue : r.queues)
      if (auto state = queue.lock()) live.push_back(std::move(state));
  }
  for (const auto& state : live) {
    std::unique_lock lock(state->mutex);
    state->idle.wait(lock, [&] { return state->idle_locked(); });
  }
}

}  // namespace rlx::torch_backend
