#include "rlx/core/shape.h"

#include <algorithm>

#include "rlx/core/kernel_util.h"

namespace rlx {

std::int64_t numel(const Shape& shape) {
  std::int64_t count = 1;
  for (std::int64_t dim : shape) count *= dim;
  return count;
}

std::string to_string(const Shape& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + ")";
}

Strides row_major_strides(const Shape& shape) {
  const detail::DimVector strides = detail::row_major(shape);
  return {strides.begin(), strides.end()};
}

void check_shape(std::string_view op, const Shape& shape) {
  for (std::int64_t dim : shape) {
    if (dim < 0) {
      throw ShapeError(std::string(op) + ": negative dimension in shape " + to_string(shape));
    }
  }
}

Shape broadcast_shapes(std::string_view op, const Shape& a, const Shape& b) {
  if (a == b) return a;
  const std::size_t ndim = std::max(a.size(), b.size());
  Shape out(ndim);
  for (std::size_t i = 0; i < ndim; ++i) {
    // Aligned from the right; missing leading dimensions act as 1.
    const std::int64_t da = i < ndim - a.size() ? 1 : a[i - (ndim - a.size())];
    const std::int64_t db = i < ndim - b.size() ? 1 : b[i - (ndim - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw ShapeError(std::string(op) + ": shapes " + to_string(a) + " and " + to_string(b) +
                       " cannot be broadcast together");
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Strides broadcast_strides(const Shape& shape, const Shape& target) {
  const detail::DimVector strides = detail::broadcast_to(shape, target);
  return {strides.begin(), strides.end()};
}

int normalize_axis(std::string_view op, int axis, int ndim) {
  const int normalized = axis < 0 ? axis + ndim : axis;
  if (normalized < 0 || normalized >= ndim) {
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) +
                     " is out of range for an array with " + std::to_string(ndim) + " dimensions");
  }
  return normalized;
}

std::vector<int> normalize_axes(std::string_view op, std::span<const int> axes, int ndim) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int axis : axes) out.push_back(normalize_axis(op, axis, ndim));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end()) {
    throw ShapeError(std::string(op) + ": repeated axis");
  }
  return out;
}

}  // namespace rlx
