// A graph compiled per input shape, replayed while the shapes repeat (as
// MLX's compile). docs/COMPILED_GRAPHS.md says how to use it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rlx/core/array.h"
#include "rlx/core/compiled_graph.h"
#include "rlx/core/graph.h"

namespace rlx {

// The shape and dtype of one input of a call.
struct InputSpec {
  Shape shape;
  Dtype dtype;
  friend bool operator==(const InputSpec&, const InputSpec&) = default;
};

class CompiledFunction {
 public:
  // Builds the graph for inputs of these shapes and dtypes; its inputs, in
  // declaration order, take the call's arrays in order.
  using Builder = std::function<Graph(std::span<const InputSpec> inputs)>;

  explicit CompiledFunction(Builder build);

  // Sets a parameter on every graph compiled so far and every later one.
  void set_param(std::string name, Array value);

  // Runs on `inputs`. The first call with a combination of shapes and dtypes
  // builds and compiles its graph; later ones replay it (no allocation after
  // its first run). Returns views valid until the next call.
  std::span<const Array> run(std::span<const Array> inputs);

  // How many graphs were built and compiled: one per combination seen.
  std::size_t compiled() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<InputSpec> key;
    CompiledGraph graph;
    std::vector<Value> values;  // reused: a run assigns, never allocates
  };

  Entry& entry_for(std::span<const Array> inputs);
  Entry& compile_for(std::span<const Array> inputs);

  Builder build_;
  std::vector<std::pair<std::string, Array>> params_;
  std::vector<std::unique_ptr<Entry>> entries_;
  Entry* last_ = nullptr;  // the shapes of the previous call, checked first
};

}  // namespace rlx
