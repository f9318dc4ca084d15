#include "rlx/core/dtype.h"

#include <string>

#include "rlx/core/error.h"

namespace rlx {

std::string_view name_of(Dtype dtype) {
  switch (dtype) {
    case Dtype::f32:
      return "f32";
    case Dtype::f64:
      return "f64";
    case Dtype::f16:
      return "f16";
    case Dtype::bf16:
      return "bf16";
    case Dtype::i32:
      return "i32";
    case Dtype::i64:
      return "i64";
    case Dtype::u8:
      return "u8";
    case Dtype::boolean:
      return "bool";
  }
  return "invalid";
}

Dtype dtype_from_name(std::string_view name) {
  for (Dtype dtype : kAllDtypes) {
    if (name_of(dtype) == name) return dtype;
  }
  throw Error("unknown dtype '" + std::string(name) +
              "': expected one of f32, f64, f16, bf16, i32, i64, u8, bool");
}

bool is_valid_dtype(std::uint8_t value) {
  return value <= static_cast<std::uint8_t>(Dtype::boolean);
}

}  // namespace rlx
