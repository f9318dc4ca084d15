// Internals of Array shared by array.cc and the evaluator (eval.cc). Not part
// of the public API.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "rlx/core/array.h"

namespace rlx::detail {

enum class NodeState : std::uint8_t {
  pending,  // has a primitive, no data
  running,  // a thread is computing it
  done,     // has data; primitive and inputs dropped
  failed,   // its primitive threw; `error` holds the exception
};

// The state shared by every handle to one array. Shape and dtype never change.
// `state` moves forward under the evaluator's mutex; `inputs`, `primitive`,
// `error` and `visit_mark` are read and written under that mutex, except that
// the thread that set `running` may read `inputs` and `primitive` and write
// `buffer` without it. Everyone else reads `buffer` only after seeing `done`.
struct ArrayNode {
  ArrayNode(Shape shape_in, Dtype dtype_in) : shape(std::move(shape_in)), dtype(dtype_in) {}
  ArrayNode(const ArrayNode&) = delete;
  ArrayNode& operator=(const ArrayNode&) = delete;
  // Iterative, so dropping the last handle to a long unevaluated chain cannot
  // overflow the stack.
  ~ArrayNode();

  const Shape shape;
  const Dtype dtype;
  std::atomic<NodeState> state{NodeState::pending};
  std::shared_ptr<const Primitive> primitive;
  std::vector<Array> inputs;
  Buffer buffer;
  std::exception_ptr error;
  std::uint64_t visit_mark = 0;  // which topological sort last reached this node
};

// The evaluator's door into Array.
struct NodeAccess {
  static const std::shared_ptr<ArrayNode>& node(const Array& array) { return array.node_; }
  static Array wrap(std::shared_ptr<ArrayNode> node) { return Array(std::move(node)); }
  static std::shared_ptr<ArrayNode> release(Array& array) { return std::move(array.node_); }
};

// How eval() would compute `roots` and the pending arrays they need, as steps
// in its order: one array, or several of one batch key that one eval_batch()
// on the first one's primitive computes (batch_cap as batch_bytes_cap(); 0:
// none). Computes nothing; a compiled graph's plan replays the steps.
std::vector<std::vector<std::shared_ptr<ArrayNode>>> plan_steps(std::span<const Array> roots,
                                                                std::size_t batch_cap);

}  // namespace rlx::detail
