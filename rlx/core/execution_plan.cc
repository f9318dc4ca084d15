#include "rlx/core/execution_plan.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "rlx/core/error.h"
#include "rlx/core/memory_plan.h"

namespace rlx::detail {
namespace {

ArrayNode& node_of(const Array& array) { return *NodeAccess::node(array); }

bool reads_any_of(const ExecutionPlan::Step& step, const ExecutionPlan::Step& earlier) {
  for (const Array& output : step.outputs) {
    for (const Array& input : node_of(output).inputs) {
      for (const Array& produced : earlier.outputs) {
        if (input.is(produced)) return true;
      }
    }
  }
  return false;
}

}  // namespace

// The one thread of the process that runs compiled graphs' background
// steps, one at a time: a plan hands it a step and later waits for it. A
// hand-over is a pointer and an index, so a run allocates nothing. When it
// is busy (another plan's step, or the caller is that step itself), the
// caller runs its step in place: waiting could deadlock collectives of
// different groups that two threads run, and running in order is always
// correct.
class BackgroundSteps {
 public:
  static BackgroundSteps& instance() {
    static auto* steps = new BackgroundSteps;  // never destroyed: plans may outlive statics
    return *steps;
  }

  // False when the thread is busy: the caller runs the step itself.
  bool start(ExecutionPlan& plan, std::size_t step) {
    {
      std::lock_guard lock(mutex_);
      if (plan_ != nullptr) return false;
      plan_ = &plan;
      step_ = step;
      done_ = false;
      error_ = nullptr;
    }
    changed_.notify_all();
    return true;
  }

  // Waits for `plan`'s step, if one is in flight; rethrows what it threw.
  void finish(ExecutionPlan& plan) {
    std::exception_ptr error;
    {
      std::unique_lock lock(mutex_);
      if (plan_ != &plan) return;
      changed_.wait(lock, [this] { return done_; });
      error = std::move(error_);
      plan_ = nullptr;
    }
    changed_.notify_all();
    if (error) std::rethrow_exception(error);
  }

 private:
  BackgroundSteps() {
    std::thread([this] { loop(); }).detach();
  }

  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      changed_.wait(lock, [this] { return plan_ != nullptr && !done_; });
      ExecutionPlan* plan = plan_;
      const std::size_t step = step_;
      lock.unlock();
      std::exception_ptr error;
      try {
        plan->run_step(step);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      error_ = std::move(error);
      done_ = true;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  ExecutionPlan* plan_ = nullptr;  // whose step is in flight or done, not yet collected
  std::size_t step_ = 0;
  bool done_ = false;
  std::exception_ptr error_;
};

const Primitive& ExecutionPlan::Step::primitive() const {
  return *node_of(outputs.front()).primitive;
}

ExecutionPlan::ExecutionPlan(std::span<const Array> roots, std::size_t batch_cap)
    : roots_(roots.begin(), roots.end()) {
  for (std::vector<std::shared_ptr<ArrayNode>>& nodes : plan_steps(roots, batch_cap)) {
    Step& step = steps_.emplace_back();
    step.outputs.reserve(nodes.size());  // items point into it
    for (std::shared_ptr<ArrayNode>& node : nodes) {
      step.outputs.push_back(NodeAccess::wrap(std::move(node)));
    }
    if (step.outputs.size() > 1) {
      for (Array& output : step.outputs) step.items.push_back({node_of(output).inputs, &output});
    }
  }
  placements_.resize(steps_.size());
  mark_joins();
  note_last_reads();
}

// After which step of the first run each intermediate's buffer can go: its
// last reader's. The first run allocates as eval does, and frees as early.
void ExecutionPlan::note_last_reads() {
  std::unordered_map<const ArrayNode*, std::size_t> last_read;
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    for (const Array& output : steps_[s].outputs) {
      last_read.emplace(&node_of(output), SIZE_MAX);
    }
  }
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    for (const Array& output : steps_[s].outputs) {
      for (const Array& input : node_of(output).inputs) {
        if (auto it = last_read.find(&node_of(input)); it != last_read.end()) it->second = s;
      }
    }
  }
  for (const Array& root : roots_) last_read.erase(&node_of(root));
  released_after_.assign(steps_.size(), {});
  for (const auto& [node, step] : last_read) {
    if (step != SIZE_MAX) released_after_[step].push_back(const_cast<ArrayNode*>(node));
  }
}

// Which step waits for each background step: the first after it that
// reads its outputs, communicates, or is not known to be local; else the
// end of the run. Decided once, so the arena keeps what a background step
// reads and writes alive until then. A step that the very next one waits
// for runs in place.
void ExecutionPlan::mark_joins() {
  joined_before_.assign(steps_.size(), steps_.size());
  std::size_t in_flight = SIZE_MAX;
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    Step& step = steps_[s];
    const Primitive& primitive = step.primitive();
    step.background = !primitive.batch_key().empty();
    if (in_flight != SIZE_MAX &&
        (step.background || !primitive.local() || reads_any_of(step, steps_[in_flight]))) {
      step.joins = true;
      joined_before_[in_flight] = s;
      in_flight = SIZE_MAX;
    }
    if (step.background) in_flight = s;
  }
  // Nothing to overlap: handing the step to the thread would only add a
  // hand-over's latency (tens of microseconds when ranks fill the cores).
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    if (steps_[s].background && joined_before_[s] == s + 1) {
      steps_[s].background = false;
      if (s + 1 < steps_.size()) steps_[s + 1].joins = false;
    }
  }
}

void ExecutionPlan::run() {
  if (!laid_out()) {
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      run_step(i);
      for (ArrayNode* node : released_after_[i]) node->buffer.reset();
    }
    lay_out();
    return;
  }
  const bool any_background =
      std::any_of(steps_.begin(), steps_.end(), [](const Step& step) { return step.background; });
  if (!any_background) {
    for (std::size_t i = 0; i < steps_.size(); ++i) run_step(i);
    return;
  }
  BackgroundSteps& background = BackgroundSteps::instance();
  try {
    run_planned();
  } catch (...) {
    try {
      background.finish(*this);  // nothing may still write the arena
    } catch (...) {
    }
    throw;
  }
  background.finish(*this);
}

void ExecutionPlan::run_planned() {
  BackgroundSteps& background = BackgroundSteps::instance();
  for (std::size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].joins) background.finish(*this);
    if (!steps_[i].background || !background.start(*this, i)) run_step(i);
  }
}

void ExecutionPlan::run_step(std::size_t index) {
  Step& step = steps_[index];
  const bool planned = laid_out();
  auto* base = static_cast<std::byte*>(arena_.get());
  for (std::size_t k = 0; k < step.outputs.size(); ++k) {
    ArrayNode& node = node_of(step.outputs[k]);
    const Placement& place = planned ? placements_[index][k] : Placement{};
    if (planned && place.shares == nullptr) {
      node.buffer = Buffer(arena_, base + place.offset);  // a view: no allocation
    } else {
      node.buffer.reset();
    }
  }
  if (step.items.empty()) {
    step.primitive().eval(node_of(step.outputs[0]).inputs, step.outputs[0]);
  } else {
    step.primitive().eval_batch(step.items);
  }
  for (std::size_t k = 0; k < step.outputs.size(); ++k) {
    Array& output = step.outputs[k];
    ArrayNode& node = node_of(output);
    if (!node.buffer) {
      throw Error(std::string(node.primitive->name()) + ": the primitive gave its output no data");
    }
    if (planned && output.nbytes() > 0 && !placed_as_planned(index, k)) changed_sharing(output);
    node.state.store(NodeState::done, std::memory_order_release);
  }
  if (!planned) note_sharing(index);
}

// The output has the data the plan gave it: its place in the arena, or the
// input whose data it shares. Inputs bound to one array look alike, so
// sharing any input outside the arena is as good.
bool ExecutionPlan::placed_as_planned(std::size_t index, std::size_t k) const {
  const Placement& place = placements_[index][k];
  const ArrayNode& node = node_of(steps_[index].outputs[k]);
  if (!place.shares)
    return node.buffer.get() == static_cast<std::byte*>(arena_.get()) + place.offset;
  if (node.buffer.get() == node_of(*place.shares).buffer.get()) return true;
  for (const Array& input : node.inputs) {
    const Buffer& data = node_of(input).buffer;
    if (data.get() == node.buffer.get() && !in_arena(data)) return true;
  }
  return false;
}

bool ExecutionPlan::in_arena(const Buffer& buffer) const {
  return arena_ && !buffer.owner_before(arena_) && !arena_.owner_before(buffer);
}

void ExecutionPlan::note_sharing(std::size_t index) {
  Step& step = steps_[index];
  placements_[index].assign(step.outputs.size(), Placement{});
  for (std::size_t k = 0; k < step.outputs.size(); ++k) {
    const Array& output = step.outputs[k];
    if (output.nbytes() == 0) continue;
    for (const Array& input : node_of(output).inputs) {
      if (node_of(input).buffer.get() == node_of(output).buffer.get()) {
        placements_[index][k].shares = &input;
        break;
      }
    }
  }
}

[[noreturn]] void ExecutionPlan::changed_sharing(const Array& output) const {
  throw Error(std::string(node_of(output).primitive->name()) +
              ": the primitive placed its output differently from the compiled graph's first "
              "run (a primitive must allocate, or share the same input's data, every time)");
}

// Buffers that share data form one buffer alive for all of them; the
// outputs of one batch step are laid out back to back, in order, so a fused
// collective can work on them in place.
void ExecutionPlan::lay_out() {
  std::unordered_map<const ArrayNode*, std::pair<std::size_t, std::size_t>> where;  // step, output
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    for (std::size_t k = 0; k < steps_[s].outputs.size(); ++k) {
      where[&node_of(steps_[s].outputs[k])] = {s, k};
    }
  }
  // The planned output whose buffer each output ends up in (itself if it owns one).
  auto owner = [&](std::size_t s, std::size_t k) {
    std::pair<std::size_t, std::size_t> at{s, k};
    while (const Array* shared = placements_[at.first][at.second].shares) {
      auto it = where.find(&node_of(*shared));
      if (it == where.end()) return std::pair<std::size_t, std::size_t>{SIZE_MAX, 0};  // external
      at = it->second;
    }
    return at;
  };
  // One block per step (its owned outputs back to back); alive until the
  // last read of any output living in it.
  std::vector<BufferLifetime> blocks(steps_.size());
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    blocks[s] = {s, s, 0};
    for (std::size_t k = 0; k < steps_[s].outputs.size(); ++k) {
      if (placements_[s][k].shares) continue;
      const Array& output = steps_[s].outputs[k];
      const std::size_t align = size_of(output.dtype());  // one dtype: no gaps
      blocks[s].bytes = (blocks[s].bytes + align - 1) / align * align;
      placements_[s][k].offset = blocks[s].bytes;
      blocks[s].bytes += output.nbytes();
    }
  }
  auto extend = [&](const ArrayNode* node, std::size_t step) {
    auto it = where.find(node);
    if (it == where.end()) return;
    const std::size_t block = owner(it->second.first, it->second.second).first;
    if (block != SIZE_MAX) blocks[block].last_step = std::max(blocks[block].last_step, step);
  };
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    for (const Array& output : steps_[s].outputs) {
      for (const Array& input : node_of(output).inputs) extend(&node_of(input), s);
    }
  }
  for (const Array& root : roots_) extend(&node_of(root), steps_.size());
  // A background step reads its inputs and writes its outputs until the
  // step that waits for it.
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    if (!steps_[s].background || joined_before_[s] <= s + 1) continue;
    const std::size_t until = joined_before_[s] - 1;
    blocks[s].last_step = std::max(blocks[s].last_step, until);
    for (const Array& output : steps_[s].outputs) {
      for (const Array& input : node_of(output).inputs) extend(&node_of(input), until);
    }
  }
  const ArenaLayout layout = lay_out_arena(blocks, kBufferAlignment);
  for (std::size_t s = 0; s < steps_.size(); ++s) {
    for (Placement& place : placements_[s]) {
      if (!place.shares) place.offset += layout.offsets[s];
    }
  }
  arena_bytes_ = layout.bytes;
  arena_ = allocate_buffer(std::max<std::size_t>(layout.bytes, 1));
}

}  // namespace rlx::detail
