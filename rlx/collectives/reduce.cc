#include "rlx/collectives/reduce.h"

#include <cstdint>
#include <type_traits>

namespace rlx {
namespace {

// Integer sums and products go through the unsigned type: wrapping is defined there.
template <class T>
struct Wrap {
  using type = T;
};
template <class T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) struct Wrap<T> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using WrapType = typename Wrap<T>::type;

// out[i] = fn(a[i], b[i]). `out` may be `a` or `b` (the in-place forms);
// a loop per case, each with restrict pointers where nothing aliases, lets
// the compiler vectorise every one.
template <class T, class Fn>
void combine(T* out, const T* a, const T* b, std::size_t n, Fn fn) {
  if (out == a) {
    const T* __restrict y = b;
    for (std::size_t i = 0; i < n; ++i) out[i] = fn(out[i], y[i]);
    return;
  }
  if (out == b) {
    const T* __restrict x = a;
    for (std::size_t i = 0; i < n; ++i) out[i] = fn(x[i], out[i]);
    return;
  }
  T* __restrict o = out;
  const T* __restrict x = a;
  for (std::size_t i = 0; i < n; ++i) o[i] = fn(x[i], b[i]);
}

template <class T>
void reduce_native(T* out, const T* a, const T* b, std::size_t n, ReduceOp op) {
  using W = WrapType<T>;
  switch (op) {
    case ReduceOp::sum:
      return combine(out, a, b, n, [](T x, T y) { return static_cast<T>(W(x) + W(y)); });
    case ReduceOp::prod:
      return combine(out, a, b, n, [](T x, T y) { return static_cast<T>(W(x) * W(y)); });
    case ReduceOp::min:
      return combine(out, a, b, n, [](T x, T y) { return y < x ? y : x; });
    case ReduceOp::max:
      return combine(out, a, b, n, [](T x, T y) { return x < y ? y : x; });
  }
}

void reduce_bool(bool* out, const bool* a, const bool* b, std::size_t n, ReduceOp op) {
  const bool is_or = op == ReduceOp::sum || op == ReduceOp::max;
  if (is_or) return combine(out, a, b, n, [](bool x, bool y) { return x || y; });
  combine(out, a, b, n, [](bool x, bool y) { return x && y; });
}

// 16-bit floats: widen a block to float, reduce there, narrow back.
template <class Half>
void reduce_half(Half* out, const Half* a, const Half* b, std::size_t n, ReduceOp op) {
  constexpr std::size_t kBlock = 256;
  float wide_a[kBlock];
  float wide_b[kBlock];
  for (std::size_t start = 0; start < n; start += kBlock) {
    const std::size_t len = n - start < kBlock ? n - start : kBlock;
    for (std::size_t i = 0; i < len; ++i) {
      wide_a[i] = static_cast<float>(a[start + i]);
      wide_b[i] = static_cast<float>(b[start + i]);
    }
    reduce_native(wide_a, wide_a, wide_b, len, op);
    for (std::size_t i = 0; i < len; ++i) out[start + i] = Half(wide_a[i]);
  }
}

void check_operands(std::size_t count, Dtype dtype, ConstElementSpan operand) {
  if (operand.dtype == dtype && operand.count == count) return;
  throw CollectiveError(ErrorKind::invalid_argument,
                        {.operation = "reduce",
                         .sizes = describe_elements(count, dtype) + " and " +
                                  describe_elements(operand.count, operand.dtype)},
                        "the operands differ in dtype or length");
}

void reduce_elements(void* out, const void* a, const void* b, std::size_t n, Dtype dtype,
                     ReduceOp op) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* o = static_cast<T*>(out);
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    if constexpr (std::is_same_v<T, bool>) {
      reduce_bool(o, x, y, n, op);
    } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      reduce_half(o, x, y, n, op);
    } else {
      reduce_native(o, x, y, n, op);
    }
  });
}

}  // namespace

void reduce_into(ElementSpan accumulator, ConstElementSpan operand, ReduceOp op) {
  check_operands(accumulator.count, accumulator.dtype, operand);
  reduce_elements(accumulator.data, accumulator.data, operand.data, accumulator.count,
                  accumulator.dtype, op);
}

void reduce_to(ElementSpan out, ConstElementSpan a, ConstElementSpan b, ReduceOp op) {
  check_operands(out.count, out.dtype, a);
  check_operands(out.count, out.dtype, b);
  reduce_elements(out.data, a.data, b.data, out.count, out.dtype, op);
}

}  // namespace rlx
