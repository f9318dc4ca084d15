// How rlx's element types and operations map onto MPI's.
//
// f32/f64 map to MPI's types and ops; i32/i64 sums and products go through
// MPI's unsigned types (wrap-around of two's complement integers is the
// wrap-around of the unsigned type, which MPI computes with unsigned C
// arithmetic, where it is defined), min and max use the signed types; bool
// is MPI_C_BOOL with MPI_LOR (sum, max) or MPI_LAND (prod, min); f16 and bf16
// use user-defined commutative ops over MPI_UINT16_T that widen to float,
// combine with reduce_into and round back (runtime.h, kernel_op); u8 sums and
// products use such an op too, because Open MPI 4.1's AVX kernels saturate
// 8-bit sums instead of wrapping (open-mpi/ompi#8045, closed as wontfix).
#pragma once

#include <cstddef>

#include <mpi.h>

#include "rlx/core/dtype.h"
#include "rlx/transport/transport.h"

namespace rlx::mpi {

struct Reduction {
  MPI_Datatype type;
  MPI_Op op;
};

// The MPI datatype and operation that compute `op` over `dtype` as rlx
// defines it. Valid after ensure_started (the user-defined ops).
Reduction reduction_for(Dtype dtype, ReduceOp op);

// A committed datatype of `bytes` contiguous bytes whose extent is `extent`,
// so that block r of an all_gather lands at r * extent: how an all_gather too
// large for MPI's int counts goes in pieces.
class StridedBytes {
 public:
  StridedBytes(std::size_t bytes, std::size_t extent);
  ~StridedBytes();
  StridedBytes(const StridedBytes&) = delete;
  StridedBytes& operator=(const StridedBytes&) = delete;

  // MPI's return code of the construction: MPI_SUCCESS, or why get() is null.
  int code() const { return code_; }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  int code_ = MPI_SUCCESS;
};

}  // namespace rlx::mpi
