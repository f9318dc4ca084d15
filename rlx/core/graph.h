// rlx::Graph: a model as a small IR of named inputs, parameters and ops,
// which compile() (rlx/core/compiled_graph.h) turns into something to run.
//
// Building a graph checks shapes and dtypes as each node is added, with the
// same rules and messages as the array ops (rlx/core/ops.h), and computes
// nothing. Custom ops get their output shape from the IR registry
// (OpExtension, rlx/core/registry.h).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/core/array.h"
#include "rlx/core/registry.h"

namespace rlx {

class Graph;

// A node of one Graph: a small value handle, valid with that graph (and its
// copies) only.
class Node {
 public:
  std::uint32_t index() const { return index_; }
  friend bool operator==(Node a, Node b) = default;

 private:
  friend class Graph;
  Node(std::uint32_t graph, std::uint32_t index) : graph_(graph), index_(index) {}

  std::uint32_t graph_;
  std::uint32_t index_;
};

class Graph {
 public:
  enum class Kind : std::uint8_t { input, param, constant, op, custom };

  // How a built-in op node becomes an array: the array op applied to the
  // arrays of its inputs.
  using Lowering = std::function<Array(std::span<const Array> inputs)>;

  // One node: what it is, what it reads, and what it produces.
  struct NodeInfo {
    Kind kind;
    std::string op;    // "input", "param", "constant", "matmul", a custom op's name...
    std::string name;  // inputs and params: the name run() and set_param() use
    Attrs attrs;       // custom ops
    std::vector<std::uint32_t> inputs;
    Shape shape;
    Dtype dtype;
    Lowering lower;  // ops; constants return their value
  };

  Graph();

  // Data given to every run, by name (see CompiledGraph::run).
  Node input(std::string name, Shape shape, Dtype dtype = Dtype::f32);
  // Data set once on the compiled graph (CompiledGraph::set_param).
  Node param(std::string name, Shape shape, Dtype dtype = Dtype::f32);
  // A fixed array baked into the graph.
  Node constant(Array value);

  Node add(Node a, Node b);
  Node sub(Node a, Node b);
  Node mul(Node a, Node b);
  Node div(Node a, Node b);
  Node maximum(Node a, Node b);
  Node minimum(Node a, Node b);
  Node matmul(Node a, Node b);

  Node neg(Node a);
  Node exp(Node a);
  Node log(Node a);
  Node tanh(Node a);
  Node relu(Node a);
  Node gelu(Node a);
  Node sqrt(Node a);

  Node sum(Node a, std::vector<int> axes, bool keepdims = false);
  Node mean(Node a, std::vector<int> axes, bool keepdims = false);
  Node max(Node a, std::vector<int> axes, bool keepdims = false);

  Node reshape(Node a, Shape shape);
  Node transpose(Node a, std::vector<int> perm = {});  // {} reverses the axes
  Node astype(Node a, Dtype dtype);

  // An op from the registries: shape and dtype come from its OpExtension now;
  // at run time its ArrayKernel lowers it. Throws rlx::Error for an unknown
  // name or the wrong number of inputs.
  Node custom_op(std::string name, Attrs attrs, std::vector<Node> inputs);

  // What run() returns, in this order.
  void set_outputs(std::vector<Node> outputs);

  const Shape& shape(Node node) const { return info(node).shape; }
  Dtype dtype(Node node) const { return info(node).dtype; }
  const NodeInfo& info(Node node) const;
  std::span<const NodeInfo> nodes() const { return nodes_; }
  std::span<const Node> outputs() const { return outputs_; }

 private:
  // Adds an op node. Its shape and dtype are those of `lower` applied to
  // placeholder arrays of its inputs: the array op's own checks, at no cost.
  Node apply(std::string op, std::vector<Node> inputs, Lowering lower);
  Node add_node(NodeInfo info);
  void check_new_name(const std::string& name) const;

  std::uint32_t id_;
  std::vector<NodeInfo> nodes_;
  std::vector<Node> outputs_;
};

}  // namespace rlx
