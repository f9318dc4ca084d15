// Reductions: sum, mean and max over any set of axes.
//
// Every reduction runs on a contiguous (outer, reduced, inner) view of its
// input. Reduced axes that are not adjacent are first moved to the end with
// a transpose, so the kernel has only two cases: inner == 1 (the last axes,
// one running total per output) and inner > 1 (whole rows accumulated).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "rlx/core/custom.h"
#include "rlx/core/error.h"
#include "rlx/core/kernel_util.h"
#include "rlx/core/op_checks.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

using detail::compute_t;

enum class ReduceOp { sum, mean, max };

constexpr std::string_view name_of(ReduceOp op) {
  return op == ReduceOp::sum ? "sum" : op == ReduceOp::mean ? "mean" : "max";
}

// How op accumulates elements of T: sums as accumulator_t<T>, max in the
// compute type.
template <ReduceOp Op, class T>
struct Reducer {
  using Acc = std::conditional_t<Op == ReduceOp::max, compute_t<T>, detail::accumulator_t<T>>;

  static Acc init() {
    if constexpr (Op != ReduceOp::max) {
      return Acc{0};
    } else if constexpr (std::numeric_limits<Acc>::has_infinity) {
      return -std::numeric_limits<Acc>::infinity();
    } else {
      return std::numeric_limits<Acc>::lowest();
    }
  }
  static Acc load(T x) {
    if constexpr (Op == ReduceOp::max) {
      return static_cast<Acc>(x);
    } else {
      return detail::to_accumulator(x);
    }
  }
  static Acc combine(Acc a, Acc b) {
    if constexpr (Op != ReduceOp::max) {
      return a + b;
    } else if constexpr (std::is_floating_point_v<Acc>) {
      return (b > a || std::isnan(b)) ? b : a;  // NaN wins, as in NumPy
    } else {
      return b > a ? b : a;
    }
  }
  static T finish(Acc acc, std::int64_t count) {
    if constexpr (Op == ReduceOp::mean) {
      return static_cast<T>(acc / static_cast<Acc>(count));
    } else if constexpr (Op == ReduceOp::max) {
      return static_cast<T>(acc);
    } else {
      return detail::from_accumulator<T>(acc);
    }
  }
};

// The reduced axes are the innermost: one total per output, kept in 8
// independent lanes so the loop pipelines (and vectorises).
template <class R, class T>
void reduce_last(const T* x, T* y, std::int64_t outer, std::int64_t count) {
  constexpr std::int64_t kLanes = 8;
  for (std::int64_t o = 0; o < outer; ++o) {
    const T* row = x + o * count;
    std::array<typename R::Acc, kLanes> lanes;
    lanes.fill(R::init());
    std::int64_t i = 0;
    for (; i + kLanes <= count; i += kLanes) {
      for (std::int64_t l = 0; l < kLanes; ++l)
        lanes[l] = R::combine(lanes[l], R::load(row[i + l]));
    }
    for (; i < count; ++i) lanes[0] = R::combine(lanes[0], R::load(row[i]));
    typename R::Acc total = lanes[0];
    for (std::int64_t l = 1; l < kLanes; ++l) total = R::combine(total, lanes[l]);
    y[o] = R::finish(total, count);
  }
}

// Axes after the reduced ones remain: accumulate whole rows of `inner`.
template <class R, class T>
void reduce_rows(const T* x, T* y, std::int64_t outer, std::int64_t count, std::int64_t inner) {
  thread_local std::vector<typename R::Acc> acc;  // kept: a compiled graph's runs allocate nothing
  acc.resize(static_cast<std::size_t>(inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    std::fill(acc.begin(), acc.end(), R::init());
    for (std::int64_t r = 0; r < count; ++r) {
      const T* row = x + (o * count + r) * inner;
      for (std::int64_t j = 0; j < inner; ++j) acc[j] = R::combine(acc[j], R::load(row[j]));
    }
    for (std::int64_t j = 0; j < inner; ++j) y[o * inner + j] = R::finish(acc[j], count);
  }
}

template <ReduceOp Op>
CustomCompute reduce_compute(Dtype dtype, std::int64_t outer, std::int64_t count,
                             std::int64_t inner) {
  return dispatch_dtype(dtype, [=](auto tag) -> CustomCompute {
    using T = decltype(tag);
    if constexpr (std::same_as<T, bool> && Op != ReduceOp::max) {
      return {};  // unreachable: rejected by check_reduce
    } else {
      return [=](std::span<const Array> in, Array& out) {
        using R = Reducer<Op, T>;
        const T* x = in[0].data<T>().data();
        T* y = out.mutable_data<T>().data();
        if (inner == 1) {
          reduce_last<R>(x, y, outer, count);
        } else {
          reduce_rows<R>(x, y, outer, count, inner);
        }
      };
    }
  });
}

void check_reduce(ReduceOp op, const Array& a, const std::vector<int>& axes) {
  if (op == ReduceOp::sum) detail::check_not_bool("sum", a.dtype());
  if (op == ReduceOp::mean) detail::check_floating("mean", a.dtype());
  for (int axis : axes) {
    if (op == ReduceOp::max && a.dim(axis) == 0) {
      throw ShapeError("max: cannot reduce the empty axis " + std::to_string(axis) + " of " +
                       to_string(a.shape()));
    }
  }
}

Shape reduced_shape(const Shape& shape, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const bool reduced = std::binary_search(axes.begin(), axes.end(), static_cast<int>(d));
    if (!reduced) {
      out.push_back(shape[d]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

// `a` with its axes permuted so the (sorted) `axes` come last, in order.
Array move_axes_last(const Array& a, const std::vector<int>& axes) {
  std::vector<int> perm;
  for (int d = 0; d < a.ndim(); ++d) {
    if (!std::binary_search(axes.begin(), axes.end(), d)) perm.push_back(d);
  }
  perm.insert(perm.end(), axes.begin(), axes.end());
  return transpose(a, perm);
}

template <ReduceOp Op>
Array reduce(const Array& a, const std::vector<int>& requested, bool keepdims) {
  std::vector<int> axes = normalize_axes(name_of(Op), requested, a.ndim());
  check_reduce(Op, a, axes);
  Shape shape = reduced_shape(a.shape(), axes, keepdims);
  if (axes.empty()) return a;
  Array input = a;
  if (axes.back() - axes.front() + 1 != static_cast<int>(axes.size())) {
    input = move_axes_last(a, axes);
    std::iota(axes.begin(), axes.end(), a.ndim() - static_cast<int>(axes.size()));
  }
  const Shape& in = input.shape();
  const auto first = in.begin() + axes.front();
  const auto last = in.begin() + axes.back() + 1;
  const std::int64_t outer = numel(Shape(in.begin(), first));
  const std::int64_t count = numel(Shape(first, last));
  const std::int64_t inner = numel(Shape(last, in.end()));
  return make_local_custom(std::string(name_of(Op)), std::move(shape), a.dtype(), {input},
                           reduce_compute<Op>(a.dtype(), outer, count, inner));
}

std::vector<int> all_axes(const Array& a) {
  std::vector<int> axes(static_cast<std::size_t>(a.ndim()));
  std::iota(axes.begin(), axes.end(), 0);
  return axes;
}

}  // namespace

Array sum(const Array& a, const std::vector<int>& axes, bool keepdims) {
  return reduce<ReduceOp::sum>(a, axes, keepdims);
}
Array sum(const Array& a, int axis, bool keepdims) { return sum(a, std::vector{axis}, keepdims); }
Array sum(const Array& a) { return sum(a, all_axes(a)); }

Array mean(const Array& a, const std::vector<int>& axes, bool keepdims) {
  return reduce<ReduceOp::mean>(a, axes, keepdims);
}
Array mean(const Array& a, int axis, bool keepdims) { return mean(a, std::vector{axis}, keepdims); }
Array mean(const Array& a) { return mean(a, all_axes(a)); }

Array max(const Array& a, const std::vector<int>& axes, bool keepdims) {
  return reduce<ReduceOp::max>(a, axes, keepdims);
}
Array max(const Array& a, int axis, bool keepdims) { return max(a, std::vector{axis}, keepdims); }
Array max(const Array& a) { return max(a, all_axes(a)); }

}  // namespace rlx
