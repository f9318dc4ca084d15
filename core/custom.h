// Arrays computed by your own CPU function at eval time.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/array.h"

namespace rlx {

// Fills `output` (already allocated with its shape and dtype; write it through
// output.mutable_data<T>()) from `inputs` (evaluated: read them with data<T>()).
// It runs on whichever thread evaluates the array, possibly the async_eval
// worker; it may block for a while (a collective waiting on other processes)
// and may throw, and the exception reaches whoever evaluates or waits.
using CustomCompute = std::function<void(std::span<const Array> inputs, Array& output)>;

// A pending array of `shape` and `dtype` that `compute` produces from `inputs`
// when it is evaluated, once. `name` appears in error messages.
Array make_custom(std::string name, Shape shape, Dtype dtype, std::vector<Array> inputs,
                  CustomCompute compute);

// The primitive make_custom() wraps `compute` in: allocates the output, then
// calls compute. Made once, it can serve any number of arrays (built with
// Array(shape, dtype, primitive, inputs)) without allocating one per array.
std::shared_ptr<const Primitive> make_custom_primitive(std::string name, CustomCompute compute);

}  // namespace rlx
