// Element types shared by the array runtime and the transports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "rlx/core/half.h"

namespace rlx {

enum class Dtype : std::uint8_t { f32, f64, f16, bf16, i32, i64, u8, boolean };

inline constexpr Dtype kAllDtypes[] = {Dtype::f32, Dtype::f64, Dtype::f16, Dtype::bf16,
                                       Dtype::i32, Dtype::i64, Dtype::u8,  Dtype::boolean};

// "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool".
std::string_view name_of(Dtype dtype);

// Inverse of name_of; throws rlx::Error naming the accepted spellings.
Dtype dtype_from_name(std::string_view name);

// True when `value` is one of the enumerators (used to validate wire input).
bool is_valid_dtype(std::uint8_t value);

template <class T>
struct DtypeOf;
template <>
struct DtypeOf<float> : std::integral_constant<Dtype, Dtype::f32> {};
template <>
struct DtypeOf<double> : std::integral_constant<Dtype, Dtype::f64> {};
template <>
struct DtypeOf<float16_t> : std::integral_constant<Dtype, Dtype::f16> {};
template <>
struct DtypeOf<bfloat16_t> : std::integral_constant<Dtype, Dtype::bf16> {};
template <>
struct DtypeOf<std::int32_t> : std::integral_constant<Dtype, Dtype::i32> {};
template <>
struct DtypeOf<std::int64_t> : std::integral_constant<Dtype, Dtype::i64> {};
template <>
struct DtypeOf<std::uint8_t> : std::integral_constant<Dtype, Dtype::u8> {};
template <>
struct DtypeOf<bool> : std::integral_constant<Dtype, Dtype::boolean> {};

// The C++ types that have a Dtype.
template <class T>
concept Element = requires {
  DtypeOf<std::remove_cv_t<T>>::value;
};

template <Element T>
inline constexpr Dtype dtype_of = DtypeOf<std::remove_cv_t<T>>::value;

// Calls fn(T{}) with the C++ type of `dtype`; every branch must return the same type.
template <class Fn>
decltype(auto) dispatch_dtype(Dtype dtype, Fn&& fn) {
  switch (dtype) {
    case Dtype::f32:
      return fn(float{});
    case Dtype::f64:
      return fn(double{});
    case Dtype::f16:
      return fn(float16_t{});
    case Dtype::bf16:
      return fn(bfloat16_t{});
    case Dtype::i32:
      return fn(std::int32_t{});
    case Dtype::i64:
      return fn(std::int64_t{});
    case Dtype::u8:
      return fn(std::uint8_t{});
    case Dtype::boolean:
      break;
  }
  return fn(bool{});
}

// Bytes per element (inline: every call of every collective asks).
inline std::size_t size_of(Dtype dtype) {
  return dispatch_dtype(dtype, [](auto tag) { return sizeof(tag); });
}

}  // namespace rlx
