// The two registries of custom ops, both keyed by op name.
//
// IR level (OpExtension): what the graph builder needs to place the op in a
// Graph: its number of inputs and how to infer its output shape (and dtype)
// from the input shapes and its attributes.
//
// Array level (ArrayKernel): what CompiledGraph::run calls to lower the op
// onto lazy arrays. A kernel receives the input arrays, still lazy, and the
// attributes, and returns a lazy array, by composing existing ops or with
// make_custom() (rlx/core/custom.h) to run its own CPU function at eval time.
//
// Registering a name again replaces the entry and warns on stderr. Looking up
// a name nobody registered throws rlx::Error naming it. Both registries are
// safe to use from several threads.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/core/array.h"

namespace rlx {

// An op's attributes: an opaque byte string only the op itself interprets
// (for instance a serialised struct).
using Attrs = std::string;

struct OpExtension {
  // Any input count (for num_inputs).
  static constexpr int kVariadic = -1;

  std::string name;
  int num_inputs = 1;
  // Output shape from the input shapes and attributes; throws ShapeError when
  // they do not fit the op.
  std::function<Shape(std::span<const Shape> inputs, std::string_view attrs)> infer_shape;
  // Output dtype; unset means the first input's dtype (f32 without inputs).
  std::function<Dtype(std::span<const Dtype> inputs, std::string_view attrs)> infer_dtype;
};

void register_op_extension(OpExtension extension);

// Throws rlx::Error if `name` is not registered.
std::shared_ptr<const OpExtension> find_op_extension(std::string_view name);

using ArrayKernel = std::function<Array(std::span<const Array> inputs, std::string_view attrs)>;

void register_array_kernel(std::string name, ArrayKernel kernel);

// Throws rlx::Error if `name` is not registered.
std::shared_ptr<const ArrayKernel> find_array_kernel(std::string_view name);

// Applies the array kernel registered as `name`.
Array custom_op(std::string_view name, const std::vector<Array>& inputs,
                std::string_view attrs = {});

}  // namespace rlx
