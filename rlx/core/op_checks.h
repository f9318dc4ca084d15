// Dtype checks the ops share, so every op words the same mistake the same
// way. Internal to core.
#pragma once

#include <string_view>

#include "rlx/core/array.h"

namespace rlx::detail {

// "add: dtypes differ: f32 and f64 (convert one with astype)".
void check_same_dtype(std::string_view op, const Array& a, const Array& b);

// "exp: needs a floating dtype, got i32".
void check_floating(std::string_view op, Dtype dtype);

// "add: not defined for bool (convert with astype)".
void check_not_bool(std::string_view op, Dtype dtype);

}  // namespace rlx::detail
