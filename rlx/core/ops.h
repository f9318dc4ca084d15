// The ops of the array runtime. Each builds a pending array and computes
// nothing; shapes, axes and dtypes are checked here, when the op is called, and
// a mismatch throws ShapeError (or rlx::Error for dtypes) naming the op and
// the shapes.
//
// Dtype rules, kept small on purpose: binary ops need both operands of the
// same dtype (convert with astype) and the result has it, except comparisons,
// which give bool. A plain number combined with an array (a * 0.5) takes the
// array's dtype. Arithmetic is not defined for bool; exp, log, tanh, gelu,
// sqrt and mean need a floating dtype. Integer arithmetic wraps around and an
// integer divided by zero gives 0. f16 and bf16 compute in float.
#pragma once

#include <cstdint>
#include <vector>

#include "rlx/core/array.h"

namespace rlx {

// --- Elementwise, with NumPy broadcasting. ---

Array add(const Array& a, const Array& b);
Array sub(const Array& a, const Array& b);
Array mul(const Array& a, const Array& b);
Array div(const Array& a, const Array& b);
Array maximum(const Array& a, const Array& b);
Array minimum(const Array& a, const Array& b);
Array greater(const Array& a, const Array& b);  // bool
Array less(const Array& a, const Array& b);     // bool
Array equal(const Array& a, const Array& b);    // bool

Array neg(const Array& a);
Array exp(const Array& a);
Array log(const Array& a);
Array tanh(const Array& a);
Array relu(const Array& a);
Array gelu(const Array& a);  // exact: x * (1 + erf(x / sqrt 2)) / 2
Array sqrt(const Array& a);

Array operator+(const Array& a, const Array& b);
Array operator-(const Array& a, const Array& b);
Array operator*(const Array& a, const Array& b);
Array operator/(const Array& a, const Array& b);
Array operator-(const Array& a);
Array operator+(const Array& a, double b);
Array operator-(const Array& a, double b);
Array operator*(const Array& a, double b);
Array operator/(const Array& a, double b);
Array operator+(double a, const Array& b);
Array operator-(double a, const Array& b);
Array operator*(double a, const Array& b);
Array operator/(double a, const Array& b);

// --- Matrix product. ---

// (..., m, k) x (..., k, n) -> (..., m, n); the leading (batch) dimensions
// broadcast. f32 and f64 go through OpenBLAS; other dtypes use a plain loop
// (accumulating in float for f16/bf16). Not defined for bool.
Array matmul(const Array& a, const Array& b);

// --- Reductions. Axes may be negative; keepdims leaves reduced axes as 1. ---

Array sum(const Array& a, const std::vector<int>& axes, bool keepdims = false);
Array sum(const Array& a, int axis, bool keepdims = false);
Array sum(const Array& a);  // every axis
Array mean(const Array& a, const std::vector<int>& axes, bool keepdims = false);
Array mean(const Array& a, int axis, bool keepdims = false);
Array mean(const Array& a);
Array max(const Array& a, const std::vector<int>& axes, bool keepdims = false);
Array max(const Array& a, int axis, bool keepdims = false);
Array max(const Array& a);

// --- Shape and type. ---

// Same elements, new shape; one dimension may be -1 (inferred). No copy.
Array reshape(const Array& a, Shape shape);
// Reverses the axes.
Array transpose(const Array& a);
// Output axis i is input axis perm[i].
Array transpose(const Array& a, const std::vector<int>& perm);
// Elements [start, stop) along every axis; needs 0 <= start <= stop <= dim.
Array slice(const Array& a, const Shape& start, const Shape& stop);
// Elements start, start + step, ... below stop; steps are positive.
Array slice(const Array& a, const Shape& start, const Shape& stop, const Shape& steps);
// Joins arrays of one dtype whose shapes differ only along `axis`.
Array concatenate(const std::vector<Array>& arrays, int axis = 0);
// Repeats `a` along broadcast dimensions to `shape`.
Array broadcast_to(const Array& a, const Shape& shape);
// Converts elements (float to integer saturates; to bool means != 0).
Array astype(const Array& a, Dtype dtype);

// --- Creation. ---

Array full(const Shape& shape, double value, Dtype dtype = Dtype::f32);
Array zeros(const Shape& shape, Dtype dtype = Dtype::f32);
Array ones(const Shape& shape, Dtype dtype = Dtype::f32);
// start, start + step, ... while below stop (above it for a negative step).
Array arange(double start, double stop, double step = 1.0, Dtype dtype = Dtype::f32);

// Deterministic random numbers: the same shape, parameters and seed give the
// same values on every machine (counter-based, element i depends only on the
// seed and i). Floating dtypes only.
Array random_uniform(const Shape& shape, double low = 0.0, double high = 1.0,
                     std::uint64_t seed = 0, Dtype dtype = Dtype::f32);  // in [low, high)
Array random_normal(const Shape& shape, double mean = 0.0, double stddev = 1.0,
                    std::uint64_t seed = 0, Dtype dtype = Dtype::f32);

}  // namespace rlx
