#include "rlx/core/eval.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "rlx/core/array_node.h"
#include "rlx/core/custom.h"
#include "rlx/core/error.h"

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
template <typename BeforeWaiting>
bool claim(ArrayNode& node, BeforeWaiting before_waiting) {
  std::unique_lock lock(g_mutex);
  if (node.state.load() == NodeState::running) {
    lock.unlock();
    before_waiting();
    lock.lock();
  }
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

// Claimed arrays of one batch key (Primitive::batch_key), waiting to be
// computed together. Arrays left when an error unwinds fail, so nobody waits
// for them.
class Bucket {
 public:
  Bucket() = default;
  Bucket(const Bucket&) = delete;
  Bucket& operator=(const Bucket&) = delete;
  ~Bucket() {
    for (const NodePtr& node : nodes_) {
      finish(*node, std::make_exception_ptr(
                        Error(std::string(node->primitive->name()) +
                              ": not computed: another array of the same eval failed first")));
    }
  }

  bool empty() const { return nodes_.empty(); }
  bool holds_any_of(const std::vector<Array>& inputs) const {
    for (const Array& input : inputs) {
      if (members_.contains(NodeAccess::node(input).get())) return true;
    }
    return false;
  }

  void add(const NodePtr& node) {
    nodes_.push_back(node);
    members_.insert(node.get());
    bytes_ += NodeAccess::wrap(node).nbytes();
  }
  std::size_t bytes() const { return bytes_; }

  // Hands the arrays over to be computed together; the bucket is empty after.
  std::vector<NodePtr> take() {
    std::vector<NodePtr> nodes = std::move(nodes_);
    nodes_.clear();
    members_.clear();
    bytes_ = 0;
    return nodes;
  }

 private:
  std::vector<NodePtr> nodes_;
  std::unordered_set<const ArrayNode*> members_;
  std::size_t bytes_ = 0;
};

// Computes claimed arrays of one batch key with one eval_batch() call.
void compute_batch(std::vector<NodePtr> nodes) {
  if (nodes.empty()) return;
  std::vector<Array> outputs;
  std::vector<Primitive::BatchItem> items;
  outputs.reserve(nodes.size());
  for (const NodePtr& node : nodes) {
    outputs.push_back(NodeAccess::wrap(node));
    items.push_back({node->inputs, &outputs.back()});
  }
  try {
    nodes.front()->primitive->eval_batch(items);
    for (const NodePtr& node : nodes) {
      if (!node->buffer) {
        throw Error(std::string(node->primitive->name()) +
                    ": the batched primitive gave an output no data");
      }
    }
  } catch (...) {
    for (const NodePtr& node : nodes) finish(*node, std::current_exception());
    throw;
  }
  for (const NodePtr& node : nodes) finish(*node, nullptr);
}

// One open Bucket per key, in the order their first arrays came. A bucket is
// flushed before a node that reads one of its arrays and at the byte cap;
// every bucket, oldest first, before this thread waits for another's node
// (which might wait for ours) and at the end of eval. Arrays of other keys
// in between do not flush it: one collective group's all-reduces fuse alike
// on its ranks whatever other groups' ops each rank interleaves with them.
class Buckets {
 public:
  using Flush = std::function<void(std::vector<NodePtr>)>;
  explicit Buckets(Flush flush) : flush_(std::move(flush)) {}

  void add(const NodePtr& node, std::string_view key, std::size_t cap) {
    auto it = std::find_if(open_.begin(), open_.end(), [&](const auto& b) { return b.key == key; });
    if (it == open_.end()) {
      open_.push_back({std::string(key), std::make_unique<Bucket>()});
      it = std::prev(open_.end());
    }
    it->bucket->add(node);
    if (it->bucket->bytes() >= cap) flush(it);
  }
  void flush_holders_of(const std::vector<Array>& inputs) {
    for (auto it = open_.begin(); it != open_.end();) {
      it = it->bucket->holds_any_of(inputs) ? flush(it) : std::next(it);
    }
  }
  void flush_all() {
    while (!open_.empty()) flush(open_.begin());
  }

 private:
  struct Open {
    std::string key;
    std::unique_ptr<Bucket> bucket;
  };
  std::list<Open>::iterator flush(std::list<Open>::iterator it) {
    std::unique_ptr<Bucket> bucket = std::move(it->bucket);
    it = open_.erase(it);
    flush_(bucket->take());
    return it;
  }
  Flush flush_;
  std::list<Open> open_;
};

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
  const std::size_t cap = batch_bytes_cap();
  Buckets buckets(compute_batch);
  for (NodePtr& node : order) {
    if (claim(*node, [&buckets] { buckets.flush_all(); })) {
      buckets.flush_holders_of(node->inputs);
      const std::string_view key = cap > 0 ? node->primitive->batch_key() : std::string_view{};
      if (key.empty()) {
        compute(node);
      } else {
        buckets.add(node, key, cap);
      }
    }
    node.reset();  // the users of an intermediate hold it for as long as they need it
  }
  buckets.flush_all();
}

namespace detail {

std::vector<std::vector<NodePtr>> plan_steps(std::span<const Array> roots, std::size_t batch_cap) {
  std::vector<NodePtr> order;
  {
    std::lock_guard lock(g_mutex);
    order = schedule(roots);
  }
  std::vector<std::vector<NodePtr>> steps;
  Buckets buckets([&steps](std::vector<NodePtr> nodes) {
    if (!nodes.empty()) steps.push_back(std::move(nodes));
  });
  for (const NodePtr& node : order) {
    buckets.flush_holders_of(node->inputs);
    const std::string_view key = batch_cap > 0 ? node->primitive->batch_key() : std::string_view{};
    if (key.empty()) {
      steps.push_back({node});
    } else {
      buckets.add(node, key, batch_cap);
    }
  }
  buckets.flush_all();
  return steps;
}

}  // namespace detail

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
