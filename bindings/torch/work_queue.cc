#include "bindings/torch/work_queue.h"

#include <algorithm>
#include <thread>

#include <ATen/core/ivalue.h>

#include "rlx/transport/log.h"

namespace rlx::torch_backend {
namespace {

// What the calling thread does for a queue: it is one of its serving
// threads (and which), it runs one of its calls (holding `running`), it
// runs callbacks of its calls (how many deep).
thread_local const QueueState* serving = nullptr;
thread_local std::uint64_t serving_id = 0;
thread_local const QueueState* running_here = nullptr;
thread_local std::vector<const QueueState*> callbacks_here;

int callbacks_here_for(const QueueState* state) {
  return static_cast<int>(std::count(callbacks_here.begin(), callbacks_here.end(), state));
}

// A serving thread: runs calls while it is the server; parked as a spare
// while another serves; ends when the queue stops.
void serve(std::shared_ptr<QueueState> state, std::uint64_t id) {
  QueueState& s = *state;
  serving = &s;
  serving_id = id;
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
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {}

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
  try {
    if (failure_) {
      future_->setError(failure_);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  } catch (const std::exception& error) {
    // A C++ callback's (Python's catch their own): the queue goes on.
    log(LogLevel::warn, std::string("a callback of a torch Future threw: ") + error.what());
  } catch (...) {
    log(LogLevel::warn, "a callback of a torch Future threw");
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
  running_here = this;
  work->run();
  running_here = nullptr;
  bool serves = false;
  {
    std::lock_guard lock(mutex);
    running = false;
    ++in_callbacks;
    // Callbacks may wait for a call queued now or later: one queued now
    // gets another server at once, a later one when it is pushed. Only the
    // server's own callbacks count (a replaced thread may finish a call).
    serves = serving == this && server == serving_id;
    if (serves) {
      server_in_callbacks = true;
      if (!queue.empty()) hand_over_locked(work->queue_);
    }
    if (!queue.empty()) work_ready.notify_all();
    idle.notify_all();  // a stop() may wait for `running` alone
  }
  callbacks_here.push_back(this);
  work->complete_future();
  work.reset();  // what it held goes before the queue may say it is idle
  callbacks_here.pop_back();
  std::lock_guard lock(mutex);
  --in_callbacks;
  if (serves && server == serving_id) server_in_callbacks = false;
  idle.notify_all();
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
  if (running_here == &s) {
    // Inside a call of this queue (its last reference dropped there): this
    // thread holds `running`, so the rest runs here, in order.
    while (!s.queue.empty()) {
      c10::intrusive_ptr<QueuedWork> work = std::move(s.queue.front());
      s.queue.pop_front();
      ++s.in_callbacks;
      lock.unlock();
      work->run();
      work->complete_future();
      work.reset();
      lock.lock();
      --s.in_callbacks;
    }
  } else {
    // Callbacks this thread runs for the queue cannot end before it does.
    const int own = callbacks_here_for(&s);
    s.idle.wait(lock, [&] { return s.queue.empty() && !s.running && s.in_callbacks == own; });
  }
  s.stopping = true;
  s.work_ready.notify_all();
  // A serving thread stopping its own queue ends when it is back in its loop.
  const int self = serving == &s ? 1 : 0;
  s.idle.wait(lock, [&] { return s.threads == self; });
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
