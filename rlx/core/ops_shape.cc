// Ops that rearrange or convert elements: reshape, transpose, slice,
// concatenate, broadcast_to, astype.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "rlx/core/copy.h"
#include "rlx/core/custom.h"
#include "rlx/core/error.h"
#include "rlx/core/kernel_util.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

// Reshaped arrays share their input's buffer: row-major data reads the same
// under any shape with the same element count.
class ReshapePrimitive final : public Primitive {
 public:
  std::string_view name() const override { return "reshape"; }
  bool local() const override { return true; }
  void eval(std::span<const Array> inputs, Array& output) const override {
    output.share_data(inputs[0]);
  }
};

// An array of `shape` whose elements are `a`'s read from `offset` with
// element `strides`: the one kernel behind transpose, slice and broadcast_to.
Array strided_view_copy(std::string name, const Array& a, Shape shape, std::int64_t offset,
                        Strides strides) {
  const Dtype dtype = a.dtype();
  Shape out_shape = shape;
  return make_local_custom(std::move(name), std::move(out_shape), dtype, {a},
                           [shape = std::move(shape), offset, strides = std::move(strides)](
                               std::span<const Array> in, Array& out) {
                             detail::copy_strided(in[0].raw_data(), offset, strides,
                                                  out.raw_mutable_data(), shape,
                                                  size_of(in[0].dtype()));
                           });
}

Shape infer_reshape(const Shape& from, Shape to) {
  const auto unknown = std::count(to.begin(), to.end(), -1);
  auto fail = [&] {
    return ShapeError("reshape: cannot reshape " + to_string(from) + " into " + to_string(to));
  };
  if (unknown > 1) throw fail();
  std::int64_t known = 1;
  for (std::int64_t dim : to) {
    if (dim < -1) throw fail();
    if (dim != -1) known *= dim;
  }
  if (unknown == 1) {
    if (known == 0 || numel(from) % known != 0) throw fail();
    *std::find(to.begin(), to.end(), -1) = numel(from) / known;
  }
  if (numel(to) != numel(from)) throw fail();
  return to;
}

void check_slice(const Array& a, const Shape& start, const Shape& stop, const Shape& steps) {
  const auto ndim = static_cast<std::size_t>(a.ndim());
  bool ok = start.size() == ndim && stop.size() == ndim && steps.size() == ndim;
  for (std::size_t i = 0; ok && i < ndim; ++i) {
    ok = 0 <= start[i] && start[i] <= stop[i] && stop[i] <= a.shape()[i] && steps[i] > 0;
  }
  if (!ok) {
    throw ShapeError("slice: start " + to_string(start) + ", stop " + to_string(stop) +
                     " and steps " + to_string(steps) + " do not fit shape " +
                     to_string(a.shape()));
  }
}

void check_concatenate(const std::vector<Array>& arrays, int axis) {
  const Array& first = arrays.front();
  for (const Array& other : arrays) {
    bool ok = other.ndim() == first.ndim() && other.dtype() == first.dtype();
    for (int d = 0; ok && d < first.ndim(); ++d) {
      ok = d == axis || other.dim(d) == first.dim(d);
    }
    if (!ok) {
      throw ShapeError("concatenate: " + to_string(first.shape()) + " " +
                       std::string(name_of(first.dtype())) + " and " + to_string(other.shape()) +
                       " " + std::string(name_of(other.dtype())) + " differ beyond axis " +
                       std::to_string(axis));
    }
  }
}

template <class From, class To>
void convert_all(const Array& in, Array& out) {
  const From* __restrict x = in.data<From>().data();
  To* __restrict y = out.mutable_data<To>().data();
  const std::int64_t n = in.size();
  for (std::int64_t i = 0; i < n; ++i) y[i] = detail::convert<To>(x[i]);
}

}  // namespace

Array reshape(const Array& a, Shape shape) {
  static const auto kReshape = std::make_shared<ReshapePrimitive>();
  Shape resolved = infer_reshape(a.shape(), std::move(shape));
  return Array(std::move(resolved), a.dtype(), kReshape, {a});
}

Array transpose(const Array& a) {
  std::vector<int> perm(static_cast<std::size_t>(a.ndim()));
  std::iota(perm.rbegin(), perm.rend(), 0);
  return transpose(a, perm);
}

Array transpose(const Array& a, const std::vector<int>& perm) {
  const std::vector<int> axes = normalize_axes("transpose", perm, a.ndim());
  if (axes.size() != static_cast<std::size_t>(a.ndim())) {
    throw ShapeError("transpose: " + std::to_string(perm.size()) + " axes for shape " +
                     to_string(a.shape()));
  }
  const Strides in_strides = row_major_strides(a.shape());
  Shape shape;
  Strides strides;
  for (int axis : perm) {
    const auto d = static_cast<std::size_t>(normalize_axis("transpose", axis, a.ndim()));
    shape.push_back(a.shape()[d]);
    strides.push_back(in_strides[d]);
  }
  return strided_view_copy("transpose", a, std::move(shape), 0, std::move(strides));
}

Array slice(const Array& a, const Shape& start, const Shape& stop) {
  return slice(a, start, stop, Shape(start.size(), 1));
}

Array slice(const Array& a, const Shape& start, const Shape& stop, const Shape& steps) {
  check_slice(a, start, stop, steps);
  const Strides in_strides = row_major_strides(a.shape());
  Shape shape;
  Strides strides;
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < start.size(); ++d) {
    shape.push_back((stop[d] - start[d] + steps[d] - 1) / steps[d]);
    strides.push_back(in_strides[d] * steps[d]);
    offset += start[d] * in_strides[d];
  }
  return strided_view_copy("slice", a, std::move(shape), offset, std::move(strides));
}

Array broadcast_to(const Array& a, const Shape& shape) {
  check_shape("broadcast_to", shape);
  if (shape.size() < a.shape().size() ||
      broadcast_shapes("broadcast_to", a.shape(), shape) != shape) {
    throw ShapeError("broadcast_to: cannot broadcast " + to_string(a.shape()) + " to " +
                     to_string(shape));
  }
  if (shape == a.shape()) return a;
  return strided_view_copy("broadcast_to", a, shape, 0, broadcast_strides(a.shape(), shape));
}

Array concatenate(const std::vector<Array>& arrays, int axis) {
  if (arrays.empty()) throw ShapeError("concatenate: no arrays");
  const Array& first = arrays.front();
  axis = normalize_axis("concatenate", axis, first.ndim());
  check_concatenate(arrays, axis);
  if (arrays.size() == 1) return first;
  Shape shape = first.shape();
  shape[static_cast<std::size_t>(axis)] = 0;
  for (const Array& a : arrays) shape[static_cast<std::size_t>(axis)] += a.dim(axis);
  const std::int64_t outer = numel(Shape(first.shape().begin(), first.shape().begin() + axis));
  return make_local_custom("concatenate", std::move(shape), first.dtype(), arrays,
                           [outer](std::span<const Array> in, Array& out) {
                             if (outer == 0) return;
                             auto* to = static_cast<std::byte*>(out.raw_mutable_data());
                             for (std::int64_t o = 0; o < outer; ++o) {
                               for (const Array& part : in) {  // a contiguous chunk of each part
                                 const std::size_t chunk =
                                     part.nbytes() / static_cast<std::size_t>(outer);
                                 const auto* from = static_cast<const std::byte*>(part.raw_data());
                                 if (chunk == 0) continue;
                                 std::memcpy(to, from + static_cast<std::size_t>(o) * chunk, chunk);
                                 to += chunk;
                               }
                             }
                           });
}

Array astype(const Array& a, Dtype dtype) {
  if (dtype == a.dtype()) return a;
  CustomCompute compute = dispatch_dtype(a.dtype(), [dtype](auto from) {
    return dispatch_dtype(dtype, [](auto to) -> CustomCompute {
      return [](std::span<const Array> in, Array& out) {
        convert_all<decltype(from), decltype(to)>(in[0], out);
      };
    });
  });
  return make_local_custom("astype", a.shape(), dtype, {a}, std::move(compute));
}

}  // namespace rlx
