// Elementwise ops: one tight loop per (op, dtype), chosen once per array.
#include <array>
#include <cmath>
#include <iterator>
#include <memory>
#include <numbers>
#include <string>
#include <string_view>

#include "rlx/core/custom.h"
#include "rlx/core/error.h"
#include "rlx/core/kernel_util.h"
#include "rlx/core/op_checks.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

using detail::check_floating;
using detail::check_not_bool;
using detail::check_same_dtype;
using detail::compute_t;

enum class BinaryOp { add, sub, mul, div, maximum, minimum, greater, less, equal };
enum class UnaryOp { neg, exp, log, tanh, relu, gelu, sqrt };

constexpr bool is_comparison(BinaryOp op) {
  return op == BinaryOp::greater || op == BinaryOp::less || op == BinaryOp::equal;
}

constexpr bool is_arithmetic(BinaryOp op) {
  return op == BinaryOp::add || op == BinaryOp::sub || op == BinaryOp::mul || op == BinaryOp::div;
}

constexpr std::string_view name_of(BinaryOp op) {
  constexpr std::string_view kNames[] = {"add",     "sub",     "mul",  "div",  "maximum",
                                         "minimum", "greater", "less", "equal"};
  return kNames[static_cast<int>(op)];
}

constexpr std::string_view name_of(UnaryOp op) {
  constexpr std::string_view kNames[] = {"neg", "exp", "log", "tanh", "relu", "gelu", "sqrt"};
  return kNames[static_cast<int>(op)];
}

// Integer arithmetic in the unsigned type, where overflow wraps instead of
// being undefined.
template <class C, class Fn>
C wrapping(C a, C b, Fn fn) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(fn(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return fn(a, b);
  }
}

template <class C>
C divide(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return wrapping(C{0}, a, [](auto x, auto y) { return x - y; });
    }
  }
  return static_cast<C>(a / b);
}

template <class C>
bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) {
    return std::isnan(x);
  } else {
    return false;
  }
}

// Scalar semantics of each binary op on the compute type C.
template <BinaryOp Op, class C>
auto apply_binary(C a, C b) {
  if constexpr (Op == BinaryOp::add) {
    return wrapping(a, b, [](auto x, auto y) { return x + y; });
  } else if constexpr (Op == BinaryOp::sub) {
    return wrapping(a, b, [](auto x, auto y) { return x - y; });
  } else if constexpr (Op == BinaryOp::mul) {
    return wrapping(a, b, [](auto x, auto y) { return x * y; });
  } else if constexpr (Op == BinaryOp::div) {
    return divide(a, b);
  } else if constexpr (Op == BinaryOp::maximum) {
    return (a > b || is_nan(a)) ? a : b;  // NaN wins, as in NumPy
  } else if constexpr (Op == BinaryOp::minimum) {
    return (a < b || is_nan(a)) ? a : b;
  } else if constexpr (Op == BinaryOp::greater) {
    return a > b;
  } else if constexpr (Op == BinaryOp::less) {
    return a < b;
  } else {
    return a == b;
  }
}

// Scalar semantics of each unary op; the transcendental ones only exist for
// floating C (ops reject other dtypes when called).
template <UnaryOp Op, class C>
C apply_unary(C x) {
  if constexpr (Op == UnaryOp::neg) {
    return wrapping(C{0}, x, [](auto a, auto b) { return a - b; });
  } else if constexpr (Op == UnaryOp::relu) {
    return x > C{0} ? x : C{0};
  } else if constexpr (!std::is_floating_point_v<C>) {
    return x;  // unreachable: rejected when the op is called
  } else if constexpr (Op == UnaryOp::exp) {
    return std::exp(x);
  } else if constexpr (Op == UnaryOp::log) {
    return std::log(x);
  } else if constexpr (Op == UnaryOp::tanh) {
    return std::tanh(x);
  } else if constexpr (Op == UnaryOp::gelu) {
    return C{0.5} * x * (C{1} + std::erf(x * static_cast<C>(std::numbers::sqrt2 / 2)));
  } else {
    return std::sqrt(x);
  }
}

// One innermost run of a broadcast binary op: x and y advance by their
// element steps, which are 0 (broadcast) or 1 in the cases worth a tight loop.
template <class T, class Out, class F>
void binary_run(F f, Out* __restrict o, const T* __restrict x, const T* __restrict y,
                std::int64_t count, std::int64_t x_step, std::int64_t y_step) {
  if (x_step == 1 && y_step == 1) {
    for (std::int64_t i = 0; i < count; ++i) o[i] = f(x[i], y[i]);
  } else if (x_step == 0 && y_step == 1) {
    for (std::int64_t i = 0; i < count; ++i) o[i] = f(*x, y[i]);
  } else if (x_step == 1 && y_step == 0) {
    for (std::int64_t i = 0; i < count; ++i) o[i] = f(x[i], *y);
  } else {
    for (std::int64_t i = 0; i < count; ++i) o[i] = f(x[i * x_step], y[i * y_step]);
  }
}

template <BinaryOp Op, class T, class Out>
void binary_kernel(const Array& a, const Array& b, Array& out) {
  using C = compute_t<T>;
  const T* pa = a.data<T>().data();
  const T* pb = b.data<T>().data();
  Out* po = out.mutable_data<Out>().data();
  auto f = [](T x, T y) {
    return static_cast<Out>(apply_binary<Op>(static_cast<C>(x), static_cast<C>(y)));
  };
  const Shape& shape = out.shape();
  if (a.size() == out.size() && b.size() == out.size()) {  // same shape: one flat run
    binary_run(f, po, pa, pb, out.size(), 1, 1);
    return;
  }
  const detail::DimVector out_strides = detail::row_major(shape);
  const detail::DimVector a_strides = detail::broadcast_to(a.shape(), shape);
  const detail::DimVector b_strides = detail::broadcast_to(b.shape(), shape);
  detail::for_each_run<3>(
      shape, {detail::as_span(out_strides), detail::as_span(a_strides), detail::as_span(b_strides)},
      [&](const auto& at, std::int64_t count, const auto& step) {
        binary_run(f, po + at[0], pa + at[1], pb + at[2], count, step[1], step[2]);
      });
}

template <BinaryOp Op>
CustomCompute binary_compute(Dtype dtype) {
  return dispatch_dtype(dtype, [](auto tag) -> CustomCompute {
    using T = decltype(tag);
    if constexpr (std::same_as<T, bool> && is_arithmetic(Op)) {
      return {};  // unreachable: rejected when the op is called
    } else {
      using Out = std::conditional_t<is_comparison(Op), bool, T>;
      return [](std::span<const Array> in, Array& out) {
        binary_kernel<Op, T, Out>(in[0], in[1], out);
      };
    }
  });
}

template <UnaryOp Op>
CustomCompute unary_compute(Dtype dtype) {
  return dispatch_dtype(dtype, [](auto tag) -> CustomCompute {
    using T = decltype(tag);
    using C = compute_t<T>;
    if constexpr (std::same_as<T, bool>) {
      return {};  // unreachable: rejected when the op is called
    } else {
      return [](std::span<const Array> in, Array& out) {
        const T* __restrict x = in[0].data<T>().data();
        T* __restrict y = out.mutable_data<T>().data();
        const std::int64_t n = out.size();
        for (std::int64_t i = 0; i < n; ++i) {
          y[i] = static_cast<T>(apply_unary<Op>(static_cast<C>(x[i])));
        }
      };
    }
  });
}

void check_unary(UnaryOp op, const Array& a) {
  check_not_bool(name_of(op), a.dtype());
  if (op != UnaryOp::neg && op != UnaryOp::relu) check_floating(name_of(op), a.dtype());
}

// One primitive per dtype, made once, for ops without attributes: building
// an array then allocates no primitive. Dtypes the op rejects get none.
using PrimitiveTable = std::array<std::shared_ptr<const Primitive>, std::size(kAllDtypes)>;

template <class ComputeFor>
PrimitiveTable make_primitives(std::string_view name, ComputeFor compute_for) {
  PrimitiveTable table;
  for (Dtype dtype : kAllDtypes) {
    if (CustomCompute compute = compute_for(dtype)) {
      table[static_cast<std::size_t>(dtype)] =
          make_local_primitive(std::string(name), std::move(compute));
    }
  }
  return table;
}

template <BinaryOp Op>
Array binary(const Array& a, const Array& b) {
  static const PrimitiveTable kPrimitives = make_primitives(name_of(Op), binary_compute<Op>);
  check_same_dtype(name_of(Op), a, b);
  if (is_arithmetic(Op)) check_not_bool(name_of(Op), a.dtype());
  Shape shape = broadcast_shapes(name_of(Op), a.shape(), b.shape());
  const Dtype dtype = is_comparison(Op) ? Dtype::boolean : a.dtype();
  return Array(std::move(shape), dtype, kPrimitives[static_cast<std::size_t>(a.dtype())], {a, b});
}

template <UnaryOp Op>
Array unary(const Array& a) {
  static const PrimitiveTable kPrimitives = make_primitives(name_of(Op), unary_compute<Op>);
  check_unary(Op, a);
  return Array(a.shape(), a.dtype(), kPrimitives[static_cast<std::size_t>(a.dtype())], {a});
}

// A plain number used with an array takes the array's dtype.
Array scalar_like(double value, const Array& like) { return full({}, value, like.dtype()); }

}  // namespace

Array add(const Array& a, const Array& b) { return binary<BinaryOp::add>(a, b); }
Array sub(const Array& a, const Array& b) { return binary<BinaryOp::sub>(a, b); }
Array mul(const Array& a, const Array& b) { return binary<BinaryOp::mul>(a, b); }
Array div(const Array& a, const Array& b) { return binary<BinaryOp::div>(a, b); }
Array maximum(const Array& a, const Array& b) { return binary<BinaryOp::maximum>(a, b); }
Array minimum(const Array& a, const Array& b) { return binary<BinaryOp::minimum>(a, b); }
Array greater(const Array& a, const Array& b) { return binary<BinaryOp::greater>(a, b); }
Array less(const Array& a, const Array& b) { return binary<BinaryOp::less>(a, b); }
Array equal(const Array& a, const Array& b) { return binary<BinaryOp::equal>(a, b); }

Array neg(const Array& a) { return unary<UnaryOp::neg>(a); }
Array exp(const Array& a) { return unary<UnaryOp::exp>(a); }
Array log(const Array& a) { return unary<UnaryOp::log>(a); }
Array tanh(const Array& a) { return unary<UnaryOp::tanh>(a); }
Array relu(const Array& a) { return unary<UnaryOp::relu>(a); }
Array gelu(const Array& a) { return unary<UnaryOp::gelu>(a); }
Array sqrt(const Array& a) { return unary<UnaryOp::sqrt>(a); }

Array operator+(const Array& a, const Array& b) { return add(a, b); }
Array operator-(const Array& a, const Array& b) { return sub(a, b); }
Array operator*(const Array& a, const Array& b) { return mul(a, b); }
Array operator/(const Array& a, const Array& b) { return div(a, b); }
Array operator-(const Array& a) { return neg(a); }
Array operator+(const Array& a, double b) { return add(a, scalar_like(b, a)); }
Array operator-(const Array& a, double b) { return sub(a, scalar_like(b, a)); }
Array operator*(const Array& a, double b) { return mul(a, scalar_like(b, a)); }
Array operator/(const Array& a, double b) { return div(a, scalar_like(b, a)); }
Array operator+(double a, const Array& b) { return add(scalar_like(a, b), b); }
Array operator-(double a, const Array& b) { return sub(scalar_like(a, b), b); }
Array operator*(double a, const Array& b) { return mul(scalar_like(a, b), b); }
Array operator/(double a, const Array& b) { return div(scalar_like(a, b), b); }

}  // namespace rlx
