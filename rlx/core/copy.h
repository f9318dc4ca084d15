// Copies between strided layouts, shared by the ops that rearrange elements
// (transpose, slice, broadcast_to, reductions over scattered axes). Internal.
#pragma once

#include <cstddef>
#include <cstdint>

#include "rlx/core/shape.h"

namespace rlx::detail {

// Writes the elements of `shape`, read from `src` starting at element
// `src_offset` with element strides `src_strides`, contiguously (row-major)
// to `dst`. Elements are `element_size` bytes.
void copy_strided(const void* src, std::int64_t src_offset, const Strides& src_strides, void* dst,
                  const Shape& shape, std::size_t element_size);

}  // namespace rlx::detail
