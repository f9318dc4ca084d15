#include "rlx/core/copy.h"

#include <array>
#include <cstring>

#include "rlx/core/kernel_util.h"

namespace rlx::detail {
namespace {

// U is an unsigned integer as wide as the element: copying needs only bytes.
template <class U>
void copy_typed(const void* src, std::int64_t src_offset, const Strides& src_strides, void* dst,
                const Shape& shape) {
  const U* from = static_cast<const U*>(src) + src_offset;
  U* to = static_cast<U*>(dst);
  const DimVector dst_strides = row_major(shape);
  for_each_run<2>(shape, {as_span(dst_strides), src_strides},
                  [&](const auto& at, std::int64_t count, const auto& step) {
                    U* out = to + at[0];
                    const U* in = from + at[1];
                    if (step[1] == 1) {
                      std::memcpy(out, in, static_cast<std::size_t>(count) * sizeof(U));
                    } else {
                      for (std::int64_t i = 0; i < count; ++i) out[i] = in[i * step[1]];
                    }
                  });
}

}  // namespace

void copy_strided(const void* src, std::int64_t src_offset, const Strides& src_strides, void* dst,
                  const Shape& shape, std::size_t element_size) {
  switch (element_size) {
    case 1:
      return copy_typed<std::uint8_t>(src, src_offset, src_strides, dst, shape);
    case 2:
      return copy_typed<std::uint16_t>(src, src_offset, src_strides, dst, shape);
    case 4:
      return copy_typed<std::uint32_t>(src, src_offset, src_strides, dst, shape);
    default:
      return copy_typed<std::uint64_t>(src, src_offset, src_strides, dst, shape);
  }
}

}  // namespace rlx::detail
