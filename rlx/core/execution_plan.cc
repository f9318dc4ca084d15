#include "rlx/core/execution_plan.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "rlx/core/error.h"
#include "rlx/core/memory_plan.h"

namespace rlx::detail {
namespace {

ArrayNode& node_of(const Array& array) { return *NodeAccess::node(array); }

}  // namespace

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
}

void ExecutionPlan::run() {
  for (std::size_t i = 0; i < steps_.size(); ++i) run_step(i);
  if (!laid_out()) lay_out();
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
    if (planned && output.nbytes() > 0) {
      const Placement& place = placements_[index][k];
      const void* expected =
          place.shares ? node_of(*place.shares).buffer.get() : base + place.offset;
      if (node.buffer.get() != expected) changed_sharing(output);
    }
    node.state.store(NodeState::done, std::memory_order_release);
  }
  if (!planned) note_sharing(index);
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
      placements_[s][k].offset = blocks[s].bytes;
      blocks[s].bytes += steps_[s].outputs[k].nbytes();
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
