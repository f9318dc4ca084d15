// Building blocks of the CPU kernels: the type arithmetic runs in, element
// conversion, and a row-major walk over strided operands. Internal to core.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "rlx/core/dtype.h"
#include "rlx/core/shape.h"

namespace rlx::detail {

template <class T>
inline constexpr bool is_half_v = std::same_as<T, float16_t> || std::same_as<T, bfloat16_t>;

template <class T>
inline constexpr bool is_floating_v = std::is_floating_point_v<T> || is_half_v<T>;

// 16-bit floats are stored as such but computed in float.
template <class T>
using compute_t = std::conditional_t<is_half_v<T>, float, T>;

// Sums of T accumulate in float for 16-bit floats and in 64-bit unsigned
// integers for integer types, where overflow wraps (into T, as T's own
// arithmetic would) instead of being undefined.
template <class T>
using accumulator_t = std::conditional_t<std::is_integral_v<T>, std::uint64_t, compute_t<T>>;

template <class T>
accumulator_t<T> to_accumulator(T value) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(value));
  } else {
    return static_cast<compute_t<T>>(value);
  }
}

template <class T>
T from_accumulator(accumulator_t<T> total) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(static_cast<std::int64_t>(total));
  } else {
    return static_cast<T>(total);
  }
}

inline bool is_floating(Dtype dtype) {
  return dispatch_dtype(dtype, [](auto tag) { return is_floating_v<decltype(tag)>; });
}

// One element converted to another type: through float for 16-bit floats,
// != 0 for bool, and float to integer saturating (NaN gives 0), so no input
// leads to undefined behaviour.
template <class To, class From>
To convert(From value) {
  using Wide = compute_t<From>;
  const Wide wide = static_cast<Wide>(value);
  if constexpr (std::same_as<To, bool>) {
    return wide != Wide{0};
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<Wide>) {
    if (!(wide == wide)) return To{0};
    if (wide <= static_cast<Wide>(std::numeric_limits<To>::min())) {
      return std::numeric_limits<To>::min();
    }
    if (wide >= static_cast<Wide>(std::numeric_limits<To>::max())) {
      return std::numeric_limits<To>::max();
    }
    return static_cast<To>(wide);
  } else {
    return static_cast<To>(static_cast<compute_t<To>>(wide));
  }
}

// Dimensions or strides inside a kernel: inline up to 8, so walking an
// array allocates nothing (a compiled graph's runs allocate nothing).
using DimVector = boost::container::small_vector<std::int64_t, 8>;

inline std::span<const std::int64_t> as_span(const DimVector& values) {
  return {values.data(), values.size()};
}

// Strides of a contiguous row-major array of `shape`; of `shape` broadcast
// to `target` (0 along broadcast dimensions).
inline DimVector row_major(std::span<const std::int64_t> shape) {
  DimVector strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}
inline DimVector broadcast_to(std::span<const std::int64_t> shape,
                              std::span<const std::int64_t> target) {
  const DimVector own = row_major(shape);
  const std::size_t lead = target.size() - shape.size();
  DimVector strides(target.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    strides[lead + i] = shape[i] == target[lead + i] ? own[i] : 0;
  }
  return strides;
}

// `shape` and per-operand strides with size-1 dimensions dropped and
// neighbours merged where every operand walks them contiguously, so that
// operands of equal contiguous shape become one dimension.
template <std::size_t N>
struct MergedDims {
  DimVector dims;
  std::array<DimVector, N> strides;
};

template <std::size_t N>
MergedDims<N> merge_dims(std::span<const std::int64_t> shape,
                         const std::array<std::span<const std::int64_t>, N>& strides) {
  MergedDims<N> out;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool mergeable = !out.dims.empty();
    for (std::size_t k = 0; k < N && mergeable; ++k) {
      mergeable = out.strides[k].back() == strides[k][d] * shape[d];
    }
    if (mergeable) {
      out.dims.back() *= shape[d];
      for (std::size_t k = 0; k < N; ++k) out.strides[k].back() = strides[k][d];
    } else {
      out.dims.push_back(shape[d]);
      for (std::size_t k = 0; k < N; ++k) out.strides[k].push_back(strides[k][d]);
    }
  }
  return out;
}

// Walks `shape` in row-major order over N operands, each read with its own
// element strides, and calls fn(offsets, count, inner_strides) once per run of
// the innermost (merged) dimension: the caller's tight loop goes there.
template <std::size_t N, class Fn>
void for_each_run(std::span<const std::int64_t> shape,
                  const std::array<std::span<const std::int64_t>, N>& strides, Fn&& fn) {
  using Index = std::array<std::int64_t, N>;
  std::int64_t elements = 1;
  for (std::int64_t dim : shape) elements *= dim;
  if (elements == 0) return;
  const MergedDims<N> merged = merge_dims(shape, strides);
  const DimVector& dims = merged.dims;
  Index offsets{};
  if (dims.empty()) {  // a single element
    fn(offsets, std::int64_t{1}, Index{});
    return;
  }
  Index inner;
  for (std::size_t k = 0; k < N; ++k) inner[k] = merged.strides[k].back();
  DimVector counter(dims.size() - 1, 0);
  for (;;) {
    fn(offsets, dims.back(), inner);
    std::size_t d = counter.size();
    for (; d-- > 0;) {  // odometer over the outer dimensions
      for (std::size_t k = 0; k < N; ++k) offsets[k] += merged.strides[k][d];
      if (++counter[d] < dims[d]) break;
      for (std::size_t k = 0; k < N; ++k) offsets[k] -= merged.strides[k][d] * dims[d];
      counter[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

}  // namespace rlx::detail
