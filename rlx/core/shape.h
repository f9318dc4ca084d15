// Shapes of arrays and the checks every op shares: element counts, row-major
// strides, NumPy broadcasting and axis normalisation. Each check throws a
// ShapeError whose message names the op and the shapes involved.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/core/error.h"

namespace rlx {

// Dimensions, outermost first; {} is a scalar.
using Shape = std::vector<std::int64_t>;

// Element strides (not bytes), one per dimension.
using Strides = std::vector<std::int64_t>;

// An op was called with shapes (or axes) it cannot accept. Thrown when the op
// is called, never at eval.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// Product of the dimensions (1 for a scalar).
std::int64_t numel(const Shape& shape);

// "(2, 3)"; "()" for a scalar.
std::string to_string(const Shape& shape);

// Strides of a contiguous row-major array of `shape`.
Strides row_major_strides(const Shape& shape);

// Throws unless every dimension is >= 0.
void check_shape(std::string_view op, const Shape& shape);

// The NumPy broadcast of `a` and `b`: dimensions aligned from the right, each
// pair equal or one of them 1.
Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b);

// Strides that read an array of `shape` as if it had `target` shape (which it
// broadcasts to): broadcast dimensions get stride 0.
Strides broadcast_strides(const Shape& shape, const Shape& target);

// Maps a possibly negative axis into [0, ndim); throws naming the op otherwise.
int normalize_axis(std::string_view op, int axis, int ndim);

// Normalises each axis and rejects duplicates; the result is sorted.
std::vector<int> normalize_axes(std::string_view op, std::span<const int> axes, int ndim);

}  // namespace rlx
