#include "rlx/core/op_checks.h"

#include <string>

#include "rlx/core/error.h"
#include "rlx/core/kernel_util.h"

namespace rlx::detail {

void check_same_dtype(std::string_view op, const Array& a, const Array& b) {
  if (a.dtype() != b.dtype()) {
    throw Error(std::string(op) + ": dtypes differ: " + std::string(name_of(a.dtype())) + " and " +
                std::string(name_of(b.dtype())) + " (convert one with astype)");
  }
}

void check_floating(std::string_view op, Dtype dtype) {
  if (!is_floating(dtype)) {
    throw Error(std::string(op) + ": needs a floating dtype, got " + std::string(name_of(dtype)));
  }
}

void check_not_bool(std::string_view op, Dtype dtype) {
  if (dtype == Dtype::boolean) {
    throw Error(std::string(op) + ": not defined for bool (convert with astype)");
  }
}

}  // namespace rlx::detail
