#include "collectives/reduce.h"

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

template <class T, class Fn>
void combine(T* __restrict acc, const T* __restrict in, std::size_t n, Fn fn) {
  for (std::size_t i = 0; i < n; ++i) acc[i] = fn(acc[i], in[i]);
}

template <class T>
void reduce_native(T* acc, const T* in, std::size_t n, ReduceOp op) {
  using W = WrapType<T>;
  switch (op) {
    case ReduceOp::sum:
      return combine(acc, in, n, [](T a, T b) { return static_cast<T>(W(a) + W(b)); });
    case ReduceOp::prod:
      return combine(acc, in, n, [](T a, T b) { return static_cast<T>(W(a) * W(b)); });
    case ReduceOp::min:
      return combine(acc, in, n, [](T a, T b) { return b < a ? b : a; });
    case ReduceOp::max:
      return combine(acc, in, n, [](T a, T b) { return a < b ? b : a; });
  }
}

void reduce_bool(bool* acc, const bool* in, std::size_t n, ReduceOp op) {
  const bool is_or = op == ReduceOp::sum || op == ReduceOp::max;
  if (is_or) return combine(acc, in, n, [](bool a, bool b) { return a || b; });
  combine(acc, in, n, [](bool a, bool b) { return a && b; });
}

// 16-bit floats: widen a block to float, reduce there, narrow back.
template <class Half>
void reduce_half(Half* acc, const Half* in, std::size_t n, ReduceOp op) {
  constexpr std::size_t kBlock = 256;
  float wide_acc[kBlock];
  float wide_in[kBlock];
  for (std::size_t start = 0; start < n; start += kBlock) {
    const std::size_t len = n - start < kBlock ? n - start : kBlock;
    for (std::size_t i = 0; i < len; ++i) {
      wide_acc[i] = static_cast<float>(acc[start + i]);
      wide_in[i] = static_cast<float>(in[start + i]);
    }
    reduce_native(wide_acc, wide_in, len, op);
    for (std::size_t i = 0; i < len; ++i) acc[start + i] = Half(wide_acc[i]);
  }
}

}  // namespace

void reduce_into(ElementSpan accumulator, ConstElementSpan operand, ReduceOp op) {
  if (accumulator.dtype != operand.dtype || accumulator.count != operand.count) {
    throw CollectiveError(ErrorKind::invalid_argument,
                          {.operation = "reduce",
                           .sizes = describe_elements(accumulator.count, accumulator.dtype) +
                                    " and " + describe_elements(operand.count, operand.dtype)},
                          "the two operands differ in dtype or length");
  }
  const std::size_t n = accumulator.count;
  dispatch_dtype(accumulator.dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* acc = static_cast<T*>(accumulator.data);
    const auto* in = static_cast<const T*>(operand.data);
    if constexpr (std::is_same_v<T, bool>) {
      reduce_bool(acc, in, n, op);
    } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
      reduce_half(acc, in, n, op);
    } else {
      reduce_native(acc, in, n, op);
    }
  });
}

}  // namespace rlx
