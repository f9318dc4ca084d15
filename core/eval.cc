#include "core/eval.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/array_node.h"
#include "core/error.h"

namespace rlx {
namespace {

using detail::ArrayNode;
using detail::NodeAccess;
using detail::NodeState;
using NodePtr = std::shared_ptr<ArrayNode>;

// One mutex guards the graph structure and node states of every array. It is
// held only to sort and to change states, never while a primitive runs, so a
// primitive that blocks (a collective) stalls nobody who does not need it.
std::mutex g_mutex;
std::condition_variable g_state_changed;
std::uint64_t g_last_mark = 0;

// The nodes `roots` need that have no data yet, inputs before their users.
// An explicit stack instead of recursion: chains may be 100k nodes deep.
// Caller holds g_mutex.
std::vector<NodePtr> schedule(std::span<const Array> roots) {
  const std::uint64_t mark = ++g_last_mark;
  std::vector<NodePtr> order;
  std::vector<std::pair<const NodePtr*, std::size_t>> stack;  // node, next input to visit
  auto visit = [&](const NodePtr& node) {
    if (node->visit_mark == mark || node->state.load() == NodeState::done) return;
    node->visit_mark = mark;
    stack.emplace_back(&node, 0);
  };
  for (const Array& root : roots) {
    if (!root.valid()) throw Error("eval: use of an empty rlx::Array");
    visit(NodeAccess::node(root));
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const std::vector<Array>& inputs = (*node)->inputs;
      if (next < inputs.size()) {
        visit(NodeAccess::node(inputs[next++]));  // may reallocate `stack`: last use of `next`
      } else {
        order.push_back(*node);
        stack.pop_back();
      }
    }
  }
  return order;
}

// Waits while another thread computes `node`. Returns true when the caller
// has claimed it and must compute it, false when it is done; rethrows if the
// primitive failed.
bool claim(ArrayNode& node) {
  std::unique_lock lock(g_mutex);
  g_state_changed.wait(lock, [&node] { return node.state.load() != NodeState::running; });
  switch (node.state.load()) {
    case NodeState::pending:
      node.state.store(NodeState::running);
      return true;
    case NodeState::failed:
      std::rethrow_exception(node.error);
    case NodeState::running:
    case NodeState::done:
      break;
  }
  return false;
}

// Publishes the result of computing `node`: its data (dropping primitive and
// inputs, so intermediates can be freed) or the exception it threw.
void finish(ArrayNode& node, std::exception_ptr error) {
  std::shared_ptr<const Primitive> primitive;  // released after unlocking
  std::vector<Array> inputs;
  {
    std::lock_guard lock(g_mutex);
    if (error) {
      node.buffer.reset();
      node.error = std::move(error);
      node.state.store(NodeState::failed);
    } else {
      primitive = std::move(node.primitive);
      inputs = std::move(node.inputs);
      node.state.store(NodeState::done, std::memory_order_release);
    }
  }
  g_state_changed.notify_all();
}

void compute(const NodePtr& node) {
  Array output = NodeAccess::wrap(node);
  try {
    node->primitive->eval(node->inputs, output);
    if (!node->buffer) {
      throw Error(std::string(node->primitive->name()) + ": the primitive gave its output no data");
    }
  } catch (...) {
    finish(*node, std::current_exception());
    throw;
  }
  finish(*node, nullptr);
}

// The one long-lived thread behind async_eval, fed through a FIFO queue.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;
  ~Worker() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();  // after finishing what was queued
  }

  void submit(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

Worker& worker() {
  static Worker instance;
  return instance;
}

}  // namespace

void eval(std::span<const Array> arrays) {
  std::vector<NodePtr> order;
  {
    std::lock_guard lock(g_mutex);
    order = schedule(arrays);
  }
  for (NodePtr& node : order) {
    if (claim(*node)) compute(node);
    node.reset();  // the users of an intermediate hold it for as long as they need it
  }
}

AsyncEval async_eval(std::span<const Array> arrays) {
  std::vector<Array> targets(arrays.begin(), arrays.end());
  for (const Array& target : targets) {
    if (!target.valid()) throw Error("async_eval: use of an empty rlx::Array");
  }
  auto promise = std::make_shared<std::promise<void>>();
  AsyncEval handle(promise->get_future().share());
  worker().submit([targets = std::move(targets), promise] {
    try {
      eval(targets);
      promise->set_value();
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
  return handle;
}

bool AsyncEval::ready() const {
  return done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace rlx
