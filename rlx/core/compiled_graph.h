// Running a Graph: compile() once, set the parameters, then run() with the
// inputs as often as needed.
//
// Each run lowers the graph onto lazy arrays (built-in ops through the array
// ops, custom ops through their ArrayKernel) and evaluates all outputs
// together, so shared work is done once.
#pragma once

#include <concepts>
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/core/array.h"
#include "rlx/core/graph.h"

namespace rlx {

// Data for a graph input or parameter: an Array (its shape and dtype must be
// the declared ones), or a flat row-major host buffer of the declared dtype
// whose shape is the declared one. Host buffers are copied; they need only
// live until run() or set_param() returns. Implicit, so {{"x", values}} reads well.
class Value {
 public:
  Value(Array array) : array_(std::move(array)) {}
  template <Element T>
  requires(!std::same_as<T, bool>)  // vector<bool> is packed
      Value(const std::vector<T>& values)
      : Value(std::span<const T>(values)) {}
  template <Element T>
  Value(std::span<const T> values)
      : data_(values.data()), count_(values.size()), dtype_(dtype_of<T>) {}

  // The value as an array for the node `what` (e.g. "input 'x'") of `shape`
  // and `dtype`; throws rlx::Error naming it when it does not fit.
  Array to_array(const std::string& what, const Shape& shape, Dtype dtype) const;

 private:
  Array array_;
  const void* data_ = nullptr;
  std::size_t count_ = 0;
  Dtype dtype_ = Dtype::f32;
};

// An input of one run, by the name given to Graph::input().
struct Feed {
  std::string name;
  Value value;
};

class CompiledGraph {
 public:
  // Sets (or replaces) a parameter declared with Graph::param().
  void set_param(std::string_view name, const Value& value);

  // Evaluates the outputs for these inputs; returns them in set_outputs()
  // order, evaluated (read them with data<T>() or to_vector<T>()). Every input
  // the outputs depend on must be fed and every parameter they use set; a
  // missing, unknown or mis-sized input is an rlx::Error naming it. An
  // exception thrown by a primitive propagates as it is.
  std::vector<Array> run(const std::vector<Feed>& feeds) const;

 private:
  friend CompiledGraph compile(const Graph& graph);

  // What a name given to run() or set_param() refers to.
  struct Declared {
    Graph::Kind kind;
    Shape shape;
    Dtype dtype;
  };

  const Declared& declared(std::string_view name, Graph::Kind kind) const;
  std::vector<Array> feed_arrays(const std::vector<Feed>& feeds) const;

  std::vector<Graph::NodeInfo> nodes_;  // those the outputs need, inputs index into it
  std::vector<std::size_t> outputs_;    // positions in nodes_
  std::map<std::string, Declared, std::less<>> declared_;
  std::map<std::string, Array, std::less<>> params_;
};

// Checks the graph (outputs set, custom ops' array kernels registered) and
// keeps the part of it the outputs need.
CompiledGraph compile(const Graph& graph);

}  // namespace rlx
