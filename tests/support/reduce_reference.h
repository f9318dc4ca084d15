// What every ReduceOp means on every dtype, written as plainly as possible:
// the reference the kernels, the algorithms and every transport are tested
// against. Integers wrap; 16-bit floats compute in float; bool is or (sum,
// max) and and (prod, min).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "rlx/core/dtype.h"
#include "rlx/transport/transport.h"

namespace rlx::testing {

template <class T>
T reference_combine(T a, T b, ReduceOp op) {
  if constexpr (std::is_same_v<T, bool>) {
    return (op == ReduceOp::sum || op == ReduceOp::max) ? (a || b) : (a && b);
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return T(reference_combine(static_cast<float>(a), static_cast<float>(b), op));
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case ReduceOp::sum:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case ReduceOp::prod:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case ReduceOp::min:
        return std::min(a, b);
      case ReduceOp::max:
        return std::max(a, b);
    }
  } else {
    switch (op) {
      case ReduceOp::sum:
        return a + b;
      case ReduceOp::prod:
        return a * b;
      case ReduceOp::min:
        return std::min(a, b);
      case ReduceOp::max:
        return std::max(a, b);
    }
  }
  return a;
}

// A small integer as an element of T (exact in every dtype for |v| <= 256;
// odd values are true for bool).
template <class T>
T small_integer_as(std::int64_t v) {
  if constexpr (std::is_same_v<T, bool>) {
    return (v & 1) != 0;
  } else if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace rlx::testing
