#include "rlx/core/compiled_graph.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "rlx/core/array_node.h"
#include "rlx/core/custom.h"
#include "rlx/core/error.h"
#include "rlx/core/eval.h"
#include "rlx/core/execution_plan.h"
#include "rlx/core/registry.h"

namespace rlx {
namespace {

using detail::ArrayNode;
using detail::NodeAccess;

std::string describe(const Shape& shape, Dtype dtype) {
  return to_string(shape) + " " + std::string(name_of(dtype));
}

// Which nodes the outputs depend on. Inputs always precede their users, so
// one backward sweep finds them all.
std::vector<bool> needed_nodes(const Graph& graph) {
  std::vector<bool> needed(graph.nodes().size(), false);
  for (Node output : graph.outputs()) needed[output.index()] = true;
  for (std::size_t i = needed.size(); i-- > 0;) {
    if (!needed[i]) continue;
    for (std::uint32_t input : graph.nodes()[i].inputs) needed[input] = true;
  }
  return needed;
}

Array lower_custom(const Graph::NodeInfo& node, const std::vector<Array>& inputs) {
  Array result = custom_op(node.op, inputs, node.attrs);
  if (result.shape() != node.shape || result.dtype() != node.dtype) {
    throw Error(node.op + ": the array kernel returned " +
                describe(result.shape(), result.dtype()) + " where shape inference gave " +
                describe(node.shape, node.dtype));
  }
  return result;
}

// An input's or parameter's array: evaluated, with the data each run binds.
Array make_slot(const Shape& shape, Dtype dtype) {
  auto node = std::make_shared<ArrayNode>(shape, dtype);
  node->state.store(detail::NodeState::done, std::memory_order_release);
  return NodeAccess::wrap(std::move(node));
}

Buffer& buffer_of(const Array& array) { return NodeAccess::node(array)->buffer; }

struct PlanCheckHolder {
  std::mutex mutex;
  PlanCheck check;
};

PlanCheckHolder& plan_check() {
  static PlanCheckHolder holder;
  return holder;
}

}  // namespace

std::string Value::misfit(const Shape& shape, Dtype dtype) const {
  if (array_.valid()) {
    if (array_.shape() == shape && array_.dtype() == dtype) return {};
    return "got an array of " + describe(array_.shape(), array_.dtype()) +
           " where the graph declares " + describe(shape, dtype);
  }
  if (dtype_ == dtype && count_ == static_cast<std::size_t>(numel(shape))) return {};
  return "got " + std::to_string(count_) + " " + std::string(name_of(dtype_)) +
         " values where the graph declares " + describe(shape, dtype) + ", " +
         std::to_string(numel(shape)) + " values";
}

Array Value::to_array(const std::string& what, const Shape& shape, Dtype dtype) const {
  if (std::string why = misfit(shape, dtype); !why.empty()) throw Error(what + ": " + why);
  if (array_.valid()) return array_;
  return Array::from_bytes(data_, shape, dtype);
}

void set_plan_check(PlanCheck check) {
  std::lock_guard lock(plan_check().mutex);
  plan_check().check = std::move(check);
}

CompiledGraph::CompiledGraph() = default;
CompiledGraph::CompiledGraph(CompiledGraph&&) noexcept = default;
CompiledGraph& CompiledGraph::operator=(CompiledGraph&&) noexcept = default;
CompiledGraph::~CompiledGraph() = default;

CompiledGraph compile(const Graph& graph) {
  if (graph.outputs().empty()) throw Error("compile: the graph has no outputs (set_outputs)");
  CompiledGraph compiled;
  const std::vector<bool> needed = needed_nodes(graph);
  std::vector<Array> values(needed.size());
  std::vector<Array> inputs;
  for (std::size_t i = 0; i < needed.size(); ++i) {
    const Graph::NodeInfo& node = graph.nodes()[i];
    const bool named = node.kind == Graph::Kind::input || node.kind == Graph::Kind::param;
    if (named) {
      auto& declared = compiled.declared_[node.name];
      declared = {node.kind, node.shape, node.dtype, {}};
      if (needed[i]) declared.slot = make_slot(node.shape, node.dtype);
      if (needed[i] && node.kind == Graph::Kind::input) {
        compiled.input_names_.push_back(node.name);
        compiled.inputs_.push_back(&declared);
      }
      if (needed[i] && node.kind == Graph::Kind::param) {
        compiled.params_.emplace_back(node.name, &declared);
      }
    }
    if (!needed[i]) continue;
    inputs.clear();
    for (std::uint32_t input : node.inputs) inputs.push_back(values[input]);
    switch (node.kind) {
      case Graph::Kind::input:
      case Graph::Kind::param:
        values[i] = compiled.declared_.find(node.name)->second.slot;
        break;
      case Graph::Kind::constant:  // evaluated now: the plan computes only its own arrays
        values[i] = node.lower(inputs);
        eval(values[i]);
        break;
      case Graph::Kind::op:
        values[i] = node.lower(inputs);
        break;
      case Graph::Kind::custom:
        values[i] = lower_custom(node, inputs);
        compiled.nodes_.push_back(node);
        compiled.lowered_.push_back(values[i]);
        break;
    }
  }
  std::vector<Array> roots;
  for (Node output : graph.outputs()) roots.push_back(values[output.index()]);
  compiled.input_storage_.resize(compiled.inputs_.size());
  compiled.plan_ = std::make_unique<detail::ExecutionPlan>(roots, batch_bytes_cap());
  for (const Array& root : roots)
    compiled.outputs_.push_back(make_slot(root.shape(), root.dtype()));
  return compiled;
}

const CompiledGraph::Declared& CompiledGraph::declared(std::string_view name,
                                                       Graph::Kind kind) const {
  const char* what = kind == Graph::Kind::input ? "input" : "parameter";
  auto it = declared_.find(name);
  if (it == declared_.end()) {
    throw Error("no " + std::string(what) + " named '" + std::string(name) + "' in the graph");
  }
  if (it->second.kind != kind) {
    throw Error("'" + std::string(name) + "' is " +
                (kind == Graph::Kind::input ? "a parameter, not an input (set it with set_param)"
                                            : "an input, not a parameter (feed it to run)"));
  }
  return it->second;
}

void CompiledGraph::set_param(std::string_view name, const Value& value) {
  const Declared& param = declared(name, Graph::Kind::param);
  const std::string what = "set_param: parameter '" + std::string(name) + "'";
  Array array = value.to_array(what, param.shape, param.dtype);
  if (!param.slot.valid()) return;  // the outputs do not use it
  array.raw_data();                 // evaluated, so a run only binds its buffer
  Carry* carried = carry_into(param);
  if (!carried && !owned_here(buffer_of(array))) {
    buffer_of(param.slot) = buffer_of(array);
    return;
  }
  // Runs write a carried parameter, and they overwrite this graph's own
  // buffers: a copy, in a fresh buffer so that handles to the old one
  // (param(), an output) keep their data.
  Buffer copy = allocate_buffer(std::max<std::size_t>(array.nbytes(), 1));
  if (array.nbytes() > 0) std::memcpy(copy.get(), array.raw_data(), array.nbytes());
  if (carried) {
    Buffer& slot = buffer_of(param.slot);
    (slot == carried->buffers[1] ? carried->buffers[1] : carried->buffers[0]) = copy;
  }
  buffer_of(param.slot) = std::move(copy);
}

bool CompiledGraph::owned_here(const Buffer& buffer) const {
  auto same = [&buffer](const Buffer& other) {
    return other && !buffer.owner_before(other) && !other.owner_before(buffer);
  };
  if (plan_->in_arena(buffer)) return true;
  for (const auto& storage : input_storage_) {
    if (same(storage[0]) || same(storage[1])) return true;
  }
  for (const Carry& carry : carries_) {
    if (same(carry.buffers[0]) || same(carry.buffers[1])) return true;
  }
  return false;
}

CompiledGraph::Carry* CompiledGraph::carry_into(const Declared& param) {
  for (Carry& carry : carries_) {
    if (carry.param == &param) return &carry;
  }
  return nullptr;
}

Array CompiledGraph::param(std::string_view name) const {
  const Declared& param = declared(name, Graph::Kind::param);
  if (!param.slot.valid() || !buffer_of(param.slot)) {
    throw Error("param: parameter '" + std::string(name) + "' is not set" +
                (param.slot.valid() ? " (set_param)" : " (the outputs do not use it)"));
  }
  // A handle of its own: a later set_param or carry rebinds the slot, not it.
  auto node = std::make_shared<ArrayNode>(param.shape, param.dtype);
  node->buffer = buffer_of(param.slot);
  node->state.store(detail::NodeState::done, std::memory_order_release);
  return NodeAccess::wrap(std::move(node));
}

void CompiledGraph::carry(std::size_t output, std::string_view name) {
  const Declared& param = declared(name, Graph::Kind::param);
  const std::span<const Array> roots = plan_->roots();
  if (output >= roots.size()) {
    throw Error("carry: output " + std::to_string(output) + " of " + std::to_string(roots.size()));
  }
  if (roots[output].shape() != param.shape || roots[output].dtype() != param.dtype) {
    throw Error("carry: output " + std::to_string(output) + " is " +
                describe(roots[output].shape(), roots[output].dtype()) + " but parameter '" +
                std::string(name) + "' is " + describe(param.shape, param.dtype));
  }
  if (!param.slot.valid()) {
    throw Error("carry: parameter '" + std::string(name) + "' is not used by the outputs");
  }
  if (carry_into(param)) {
    throw Error("carry: parameter '" + std::string(name) + "' is carried already");
  }
  // Two buffers: a run reads one while the outputs are copied into the
  // other, so outputs that are (views of) parameters keep this run's values
  // and parameters may trade values.
  const std::size_t bytes = std::max<std::size_t>(param.slot.nbytes(), 1);
  const Buffer current = buffer_of(param.slot);
  carries_.push_back({output, &param, {allocate_buffer(bytes), allocate_buffer(bytes)}});
  if (current) {
    if (param.slot.nbytes() > 0) {
      std::memcpy(carries_.back().buffers[0].get(), current.get(), param.slot.nbytes());
    }
    buffer_of(param.slot) = carries_.back().buffers[0];
  }
}

void CompiledGraph::bind_input(std::size_t index, const Value& value) {
  const Declared& input = *inputs_[index];
  if (std::string why = value.misfit(input.shape, input.dtype); !why.empty()) {
    throw Error("run: input '" + input_names_[index] + "': " + why);
  }
  Buffer& bound = buffer_of(input.slot);
  const Array* array = value.array();
  if (array) {
    array->raw_data();  // evaluated
    if (!owned_here(buffer_of(*array))) {
      bound = buffer_of(*array);
      return;
    }
  }
  // Host data, or this graph's own buffer (an output, a parameter) that
  // the run or this binding would overwrite.
  // Runs alternate between two buffers, so what the last run's outputs
  // show (an input passed through) is not overwritten while binding.
  auto& pair = input_storage_[index];
  const std::size_t bytes = input.slot.nbytes();
  if (!pair[0]) {
    for (Buffer& buffer : pair) buffer = allocate_buffer(std::max<std::size_t>(bytes, 1));
  }
  Buffer& storage = pair[input_parity_];
  const void* from = array ? array->raw_data() : value.host_data();
  if (bytes > 0) std::memmove(storage.get(), from, bytes);
  bound = storage;
}

void CompiledGraph::check_params_set() const {
  for (const auto& [name, declared] : params_) {
    if (!buffer_of(declared->slot)) {
      throw Error("run: parameter '" + name + "' is not set (set_param)");
    }
  }
}

void CompiledGraph::carry_outputs() {
  for (Carry& carry : carries_) {
    const Array& from = plan_->roots()[carry.output];
    Buffer& slot = buffer_of(carry.param->slot);
    Buffer& spare = slot == carry.buffers[0] ? carry.buffers[1] : carry.buffers[0];
    if (from.nbytes() > 0) std::memcpy(spare.get(), from.raw_data(), from.nbytes());
  }
  for (Carry& carry : carries_) {  // after every copy: a parameter may feed another
    Buffer& slot = buffer_of(carry.param->slot);
    slot = slot == carry.buffers[0] ? carry.buffers[1] : carry.buffers[0];
  }
}

std::span<const Array> CompiledGraph::run_slots(std::span<const Value> inputs) {
  run_bound(inputs);
  carry_outputs();
  return outputs_;
}

void CompiledGraph::run_bound(std::span<const Value> inputs) {
  if (inputs.size() != inputs_.size()) {
    throw Error("run_slots: got " + std::to_string(inputs.size()) +
                " inputs where the graph takes " + std::to_string(inputs_.size()) +
                " (input_names())");
  }
  input_parity_ ^= 1;
  for (std::size_t i = 0; i < inputs.size(); ++i) bind_input(i, inputs[i]);
  check_params_set();
  if (!checked_) {
    PlanCheck check;
    {
      std::lock_guard lock(plan_check().mutex);
      check = plan_check().check;
    }
    if (check) {
      // Where each array is computed: step, then place in a fused call.
      std::unordered_map<const ArrayNode*, std::pair<std::size_t, std::size_t>> place_of;
      const auto steps = plan_->steps();
      for (std::size_t s = 0; s < steps.size(); ++s) {
        for (std::size_t k = 0; k < steps[s].outputs.size(); ++k) {
          place_of[NodeAccess::node(steps[s].outputs[k]).get()] = {s, k};
        }
      }
      std::vector<std::pair<std::pair<std::size_t, std::size_t>, PlannedOp>> placed;
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        auto it = place_of.find(NodeAccess::node(lowered_[i]).get());
        const auto place = it == place_of.end() ? std::pair{SIZE_MAX, SIZE_MAX} : it->second;
        placed.push_back({place, PlannedOp{&nodes_[i], place.first}});
      }
      std::stable_sort(placed.begin(), placed.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<PlannedOp> ops;
      for (const auto& entry : placed) ops.push_back(entry.second);
      check(ops);
    }
    checked_ = true;
  }
  plan_->run();
  // Handles of their own: an output that is a parameter keeps the data this
  // run read when a carry rebinds the parameter.
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    buffer_of(outputs_[i]) = buffer_of(plan_->roots()[i]);
  }
}

std::vector<Array> CompiledGraph::run(const std::vector<Feed>& feeds) {
  std::map<std::string_view, const Value*> by_name;
  for (const Feed& feed : feeds) {
    declared(feed.name, Graph::Kind::input);  // rejects unknown names
    if (!by_name.emplace(feed.name, &feed.value).second) {
      throw Error("run: input '" + feed.name + "' is fed twice");
    }
  }
  std::vector<Value> values;
  values.reserve(inputs_.size());
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    auto it = by_name.find(input_names_[i]);
    if (it == by_name.end()) {
      throw Error("run: missing input '" + input_names_[i] + "' of " +
                  describe(inputs_[i]->shape, inputs_[i]->dtype));
    }
    values.push_back(*it->second);
  }
  run_bound(values);
  std::vector<Array> outputs;
  for (const Array& view : outputs_) {
    outputs.push_back(Array::from_bytes(view.raw_data(), view.shape(), view.dtype()));
  }
  carry_outputs();  // after the copies: an output may be a carried parameter
  return outputs;
}

std::size_t CompiledGraph::steps() const { return plan_->steps().size(); }
std::size_t CompiledGraph::arena_bytes() const { return plan_->arena_bytes(); }

}  // namespace rlx
