#include "rlx/core/graph.h"

#include <atomic>
#include <utility>

#include "rlx/core/error.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

// Stands in for a node's value while the graph is built; ops only read its
// shape and dtype, and nothing evaluates it.
class Placeholder final : public Primitive {
 public:
  std::string_view name() const override { return "graph placeholder"; }
  void eval(std::span<const Array>, Array&) const override {
    throw Error("a graph placeholder cannot be evaluated");
  }
};

Array placeholder(const Shape& shape, Dtype dtype) {
  static const auto kPlaceholder = std::make_shared<Placeholder>();
  return Array(shape, dtype, kPlaceholder, {});
}

std::uint32_t next_graph_id() {
  static std::atomic<std::uint32_t> last{0};
  return ++last;
}

// A lowering that applies a unary / binary array op.
template <class Op>
Graph::Lowering unary(Op op) {
  return [op](std::span<const Array> in) { return op(in[0]); };
}
template <class Op>
Graph::Lowering binary(Op op) {
  return [op](std::span<const Array> in) { return op(in[0], in[1]); };
}

}  // namespace

Graph::Graph() : id_(next_graph_id()) {}

const Graph::NodeInfo& Graph::info(Node node) const {
  if (node.graph_ != id_ || node.index_ >= nodes_.size()) {
    throw Error("Graph: node " + std::to_string(node.index_) + " belongs to another graph");
  }
  return nodes_[node.index_];
}

Node Graph::add_node(NodeInfo node_info) {
  nodes_.push_back(std::move(node_info));
  return Node(id_, static_cast<std::uint32_t>(nodes_.size() - 1));
}

void Graph::check_new_name(const std::string& name) const {
  if (name.empty()) throw Error("Graph: inputs and params need a name");
  for (const NodeInfo& node : nodes_) {
    if ((node.kind == Kind::input || node.kind == Kind::param) && node.name == name) {
      throw Error("Graph: the name '" + name + "' is taken (by a " + node.op + ")");
    }
  }
}

Node Graph::input(std::string name, Shape shape, Dtype dtype) {
  check_new_name(name);
  check_shape("input '" + name + "'", shape);
  return add_node({.kind = Kind::input,
                   .op = "input",
                   .name = std::move(name),
                   .shape = std::move(shape),
                   .dtype = dtype});
}

Node Graph::param(std::string name, Shape shape, Dtype dtype) {
  check_new_name(name);
  check_shape("param '" + name + "'", shape);
  return add_node({.kind = Kind::param,
                   .op = "param",
                   .name = std::move(name),
                   .shape = std::move(shape),
                   .dtype = dtype});
}

Node Graph::constant(Array value) {
  Shape shape = value.shape();
  const Dtype dtype = value.dtype();
  return add_node({.kind = Kind::constant,
                   .op = "constant",
                   .shape = std::move(shape),
                   .dtype = dtype,
                   .lower = [value = std::move(value)](std::span<const Array>) { return value; }});
}

Node Graph::apply(std::string op, std::vector<Node> inputs, Lowering lower) {
  std::vector<Array> placeholders;
  std::vector<std::uint32_t> indices;
  for (Node input : inputs) {
    placeholders.push_back(placeholder(shape(input), dtype(input)));
    indices.push_back(input.index_);
  }
  const Array prototype = lower(placeholders);  // throws the op's own shape errors
  return add_node({.kind = Kind::op,
                   .op = std::move(op),
                   .inputs = std::move(indices),
                   .shape = prototype.shape(),
                   .dtype = prototype.dtype(),
                   .lower = std::move(lower)});
}

Node Graph::add(Node a, Node b) { return apply("add", {a, b}, binary(rlx::add)); }
Node Graph::sub(Node a, Node b) { return apply("sub", {a, b}, binary(rlx::sub)); }
Node Graph::mul(Node a, Node b) { return apply("mul", {a, b}, binary(rlx::mul)); }
Node Graph::div(Node a, Node b) { return apply("div", {a, b}, binary(rlx::div)); }
Node Graph::maximum(Node a, Node b) { return apply("maximum", {a, b}, binary(rlx::maximum)); }
Node Graph::minimum(Node a, Node b) { return apply("minimum", {a, b}, binary(rlx::minimum)); }
Node Graph::matmul(Node a, Node b) { return apply("matmul", {a, b}, binary(rlx::matmul)); }

Node Graph::neg(Node a) { return apply("neg", {a}, unary(rlx::neg)); }
Node Graph::exp(Node a) { return apply("exp", {a}, unary(rlx::exp)); }
Node Graph::log(Node a) { return apply("log", {a}, unary(rlx::log)); }
Node Graph::tanh(Node a) { return apply("tanh", {a}, unary(rlx::tanh)); }
Node Graph::relu(Node a) { return apply("relu", {a}, unary(rlx::relu)); }
Node Graph::gelu(Node a) { return apply("gelu", {a}, unary(rlx::gelu)); }
Node Graph::sqrt(Node a) { return apply("sqrt", {a}, unary(rlx::sqrt)); }

Node Graph::sum(Node a, std::vector<int> axes, bool keepdims) {
  return apply("sum", {a}, unary([axes = std::move(axes), keepdims](const Array& x) {
                 return rlx::sum(x, axes, keepdims);
               }));
}

Node Graph::mean(Node a, std::vector<int> axes, bool keepdims) {
  return apply("mean", {a}, unary([axes = std::move(axes), keepdims](const Array& x) {
                 return rlx::mean(x, axes, keepdims);
               }));
}

Node Graph::max(Node a, std::vector<int> axes, bool keepdims) {
  return apply("max", {a}, unary([axes = std::move(axes), keepdims](const Array& x) {
                 return rlx::max(x, axes, keepdims);
               }));
}

Node Graph::reshape(Node a, Shape shape) {
  return apply("reshape", {a}, unary([shape = std::move(shape)](const Array& x) {
                 return rlx::reshape(x, shape);
               }));
}

Node Graph::transpose(Node a, std::vector<int> perm) {
  return apply("transpose", {a}, unary([perm = std::move(perm)](const Array& x) {
                 return perm.empty() ? rlx::transpose(x) : rlx::transpose(x, perm);
               }));
}

Node Graph::astype(Node a, Dtype dtype) {
  return apply("astype", {a}, unary([dtype](const Array& x) { return rlx::astype(x, dtype); }));
}

Node Graph::custom_op(std::string name, Attrs attrs, std::vector<Node> inputs) {
  const auto extension = find_op_extension(name);
  if (extension->num_inputs != OpExtension::kVariadic &&
      static_cast<std::size_t>(extension->num_inputs) != inputs.size()) {
    throw Error(name + ": takes " + std::to_string(extension->num_inputs) + " inputs, got " +
                std::to_string(inputs.size()));
  }
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes;
  std::vector<std::uint32_t> indices;
  for (Node input : inputs) {
    shapes.push_back(shape(input));
    dtypes.push_back(dtype(input));
    indices.push_back(input.index_);
  }
  Shape shape = extension->infer_shape(shapes, attrs);
  check_shape(name, shape);
  const Dtype dtype = extension->infer_dtype ? extension->infer_dtype(dtypes, attrs)
                      : dtypes.empty()       ? Dtype::f32
                                             : dtypes.front();
  return add_node({.kind = Kind::custom,
                   .op = std::move(name),
                   .attrs = std::move(attrs),
                   .inputs = std::move(indices),
                   .shape = std::move(shape),
                   .dtype = dtype});
}

void Graph::set_outputs(std::vector<Node> outputs) {
  for (Node output : outputs) info(output);  // rejects nodes of other graphs
  outputs_ = std::move(outputs);
}

}  // namespace rlx
