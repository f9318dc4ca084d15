#include "rlx/core/compiled_graph.h"

#include <utility>

#include "rlx/core/error.h"
#include "rlx/core/eval.h"
#include "rlx/core/registry.h"

namespace rlx {
namespace {

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

}  // namespace

Array Value::to_array(const std::string& what, const Shape& shape, Dtype dtype) const {
  if (array_.valid()) {
    if (array_.shape() != shape || array_.dtype() != dtype) {
      throw Error(what + ": got an array of " + describe(array_.shape(), array_.dtype()) +
                  " where the graph declares " + describe(shape, dtype));
    }
    return array_;
  }
  if (dtype_ != dtype || count_ != static_cast<std::size_t>(numel(shape))) {
    throw Error(what + ": got " + std::to_string(count_) + " " + std::string(name_of(dtype_)) +
                " values where the graph declares " + describe(shape, dtype) + ", " +
                std::to_string(numel(shape)) + " values");
  }
  return Array::from_bytes(data_, shape, dtype);
}

CompiledGraph compile(const Graph& graph) {
  if (graph.outputs().empty()) throw Error("compile: the graph has no outputs (set_outputs)");
  CompiledGraph compiled;
  const std::vector<bool> needed = needed_nodes(graph);
  std::vector<std::size_t> position(needed.size());
  for (std::size_t i = 0; i < needed.size(); ++i) {
    const Graph::NodeInfo& node = graph.nodes()[i];
    if (node.kind == Graph::Kind::input || node.kind == Graph::Kind::param) {
      compiled.declared_.emplace(node.name,
                                 CompiledGraph::Declared{node.kind, node.shape, node.dtype});
    }
    if (!needed[i]) continue;
    if (node.kind == Graph::Kind::custom) find_array_kernel(node.op);  // unknown: fail now
    position[i] = compiled.nodes_.size();
    compiled.nodes_.push_back(node);
    for (std::uint32_t& input : compiled.nodes_.back().inputs)
      input = static_cast<std::uint32_t>(position[input]);
  }
  for (Node output : graph.outputs()) compiled.outputs_.push_back(position[output.index()]);
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
  Array array =
      value.to_array("set_param: parameter '" + std::string(name) + "'", param.shape, param.dtype);
  params_.insert_or_assign(std::string(name), std::move(array));
}

// The array of each input node of nodes_ (empty elsewhere), from the feeds.
std::vector<Array> CompiledGraph::feed_arrays(const std::vector<Feed>& feeds) const {
  std::map<std::string_view, const Value*> by_name;
  for (const Feed& feed : feeds) {
    declared(feed.name, Graph::Kind::input);  // rejects unknown names
    if (!by_name.emplace(feed.name, &feed.value).second) {
      throw Error("run: input '" + feed.name + "' is fed twice");
    }
  }
  std::vector<Array> values(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Graph::NodeInfo& node = nodes_[i];
    if (node.kind != Graph::Kind::input) continue;
    auto it = by_name.find(node.name);
    if (it == by_name.end()) {
      throw Error("run: missing input '" + node.name + "' of " + describe(node.shape, node.dtype));
    }
    values[i] = it->second->to_array("run: input '" + node.name + "'", node.shape, node.dtype);
  }
  return values;
}

std::vector<Array> CompiledGraph::run(const std::vector<Feed>& feeds) const {
  std::vector<Array> values = feed_arrays(feeds);
  std::vector<Array> inputs;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Graph::NodeInfo& node = nodes_[i];
    inputs.clear();
    for (std::uint32_t input : node.inputs) inputs.push_back(values[input]);
    switch (node.kind) {
      case Graph::Kind::input:
        break;
      case Graph::Kind::param: {
        auto it = params_.find(node.name);
        if (it == params_.end()) {
          throw Error("run: parameter '" + node.name + "' is not set (set_param)");
        }
        values[i] = it->second;
        break;
      }
      case Graph::Kind::constant:
      case Graph::Kind::op:
        values[i] = node.lower(inputs);
        break;
      case Graph::Kind::custom:
        values[i] = lower_custom(node, inputs);
        break;
    }
  }
  std::vector<Array> outputs;
  for (std::size_t position : outputs_) outputs.push_back(values[position]);
  values.clear();  // intermediates stay alive only as long as eval needs them
  inputs.clear();
  eval(outputs);
  return outputs;
}

}  // namespace rlx
