// Running a Graph: compile() once, set the parameters, then run it as often
// as needed.
//
// compile() lowers the graph once onto arrays of its own, fixes the order of
// its kernels (as eval() would run them, fused all-reduces included), and
// the first run lays out one arena for every intermediate by the buffers'
// lifetimes. Every later run computes into that arena: run_slots() allocates
// nothing, and run() only the copies of the outputs it returns.
// docs/COMPILED_GRAPHS.md says how to use it.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/core/array.h"
#include "rlx/core/graph.h"

namespace rlx {

namespace detail {
class ExecutionPlan;
}

// Data for a graph input or parameter: an Array (its shape and dtype must be
// the declared ones), or a flat row-major host buffer of the declared dtype
// whose shape is the declared one. Host buffers are copied (once, into the
// graph's own storage); arrays are used where they are. Either need only
// live until the call returns, but an array's data must not change while a
// run reads it. Implicit, so {{"x", values}} reads well. A Value made from a
// vector or span only points at it: `const Value in[] = {std::vector<float>(n)}`
// dangles; name the vector.
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
  // Why the value does not fit `shape` and `dtype`; empty when it does.
  std::string misfit(const Shape& shape, Dtype dtype) const;

  const Array* array() const { return array_.valid() ? &array_ : nullptr; }
  const void* host_data() const { return data_; }

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
  CompiledGraph(CompiledGraph&&) noexcept;
  CompiledGraph& operator=(CompiledGraph&&) noexcept;
  ~CompiledGraph();

  // Sets (or replaces) a parameter declared with Graph::param(). An array is
  // used where it is (its data must not change while runs read it); host
  // values, buffers of this graph (its outputs, parameters) and carried
  // parameters are copied, into a fresh buffer: handles to the old value
  // keep it.
  void set_param(std::string_view name, const Value& value);

  // A parameter's current value: what set_param() gave, or what carry() put
  // there after the last run (then a view of the graph's copy, valid until
  // the next run). Throws rlx::Error when it is not set.
  Array param(std::string_view name) const;

  // After every run, parameter `param` takes the value of output `output`
  // (an index into set_outputs()): new weights for the next step, a KV
  // cache. Shapes and dtypes must match. The parameter becomes the graph's
  // own, in two buffers (a run reads one while the output is copied into
  // the other), so an output that is the parameter itself shows the value
  // the run used, and parameters can trade values.
  void carry(std::size_t output, std::string_view param);

  // Evaluates the outputs for these inputs and returns copies of them in
  // set_outputs() order, evaluated (read them with data<T>() or
  // to_vector<T>()). Every input the outputs depend on must be fed and every
  // parameter they use set; a missing, unknown or mis-sized input is an
  // rlx::Error naming it. An exception thrown by a primitive propagates as it
  // is. One run at a time per CompiledGraph.
  std::vector<Array> run(const std::vector<Feed>& feeds);

  // The fast path: `inputs` in input_names() order. Returns the outputs as
  // views of the graph's arena, valid until the next run (copy what you
  // keep); after the first run it allocates nothing. Errors as run().
  std::span<const Array> run_slots(std::span<const Value> inputs);

  // The inputs the outputs need, in the order Graph::input() declared them.
  const std::vector<std::string>& input_names() const { return input_names_; }

  // The kernels (fused calls count once) one run executes.
  std::size_t steps() const;
  // The arena's size after the first run (0 before).
  std::size_t arena_bytes() const;

 private:
  friend CompiledGraph compile(const Graph& graph);
  CompiledGraph();

  // What a name given to run() or set_param() refers to.
  struct Declared {
    Graph::Kind kind;
    Shape shape;
    Dtype dtype;
    Array slot;  // where runs find its data (needed inputs and params only)
  };
  struct Carry {
    std::size_t output;
    const Declared* param;
    Buffer buffers[2];  // the slot binds one; the next values go to the other
  };

  const Declared& declared(std::string_view name, Graph::Kind kind) const;
  void bind_input(std::size_t index, const Value& value);
  void check_params_set() const;
  void run_bound(std::span<const Value> inputs);
  void carry_outputs();
  Carry* carry_into(const Declared& param);
  // True for buffers runs write: the arena, input storage, carried parameters.
  bool owned_here(const Buffer& buffer) const;

  std::map<std::string, Declared, std::less<>> declared_;
  std::vector<std::string> input_names_;
  std::vector<const Declared*> inputs_;                          // input_names() order
  std::vector<std::array<Buffer, 2>> input_storage_;             // host values are copied here
  std::size_t input_parity_ = 0;                                 // which of the two this run uses
  std::vector<std::pair<std::string, const Declared*>> params_;  // needed, in declaration order
  std::vector<Graph::NodeInfo> nodes_;                           // those the outputs need
  std::vector<Array> lowered_;  // nodes_' arrays, for the plan check
  std::vector<Carry> carries_;
  std::vector<Array> outputs_;  // what runs return: views of the plan's roots
  std::unique_ptr<detail::ExecutionPlan> plan_;
  bool checked_ = false;
};

// Checks the graph (outputs set, custom ops' array kernels registered),
// keeps the part of it the outputs need and plans its run.
CompiledGraph compile(const Graph& graph);

// A custom op of a compiled graph as its plan runs it: `step` is the index
// of the kernel call that computes it (ops fused into one call share it;
// SIZE_MAX when lowering left nothing to compute, e.g. a group of one).
struct PlannedOp {
  const Graph::NodeInfo* node;
  std::size_t step;
};

// Runs once before each compiled graph's first run, with its custom ops in
// the order the plan computes them (by step, then by place in a fused call). The collectives
// install one that checks that every rank of a group planned the same collective calls
// (rlx/collectives/array_collectives.h).
using PlanCheck = std::function<void(std::span<const PlannedOp> ops)>;
void set_plan_check(PlanCheck check);

}  // namespace rlx
