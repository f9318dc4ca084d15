#include "rlx/backends/mpi/datatypes.h"

#include "rlx/backends/mpi/runtime.h"

namespace rlx::mpi {
namespace {

MPI_Op native_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      break;
  }
  return MPI_MAX;
}

}  // namespace

Reduction reduction_for(Dtype dtype, ReduceOp op) {
  const bool wraps = op == ReduceOp::sum || op == ReduceOp::prod;
  switch (dtype) {
    case Dtype::f32:
      return {MPI_FLOAT, native_op(op)};
    case Dtype::f64:
      return {MPI_DOUBLE, native_op(op)};
    case Dtype::i32:
      return {wraps ? MPI_UINT32_T : MPI_INT32_T, native_op(op)};
    case Dtype::i64:
      return {wraps ? MPI_UINT64_T : MPI_INT64_T, native_op(op)};
    case Dtype::u8:
      // Open MPI's AVX kernels saturate 8-bit sums (open-mpi/ompi#8045, "wontfix").
      return {MPI_UINT8_T, wraps ? kernel_op(dtype, op) : native_op(op)};
    case Dtype::f16:
    case Dtype::bf16:
      return {MPI_UINT16_T, kernel_op(dtype, op)};
    case Dtype::boolean:
      break;
  }
  return {MPI_C_BOOL, op == ReduceOp::sum || op == ReduceOp::max ? MPI_LOR : MPI_LAND};
}

StridedBytes::StridedBytes(std::size_t bytes, std::size_t extent) {
  MPI_Datatype contiguous = MPI_DATATYPE_NULL;
  code_ = MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &contiguous);
  if (code_ != MPI_SUCCESS) return;
  code_ = MPI_Type_create_resized(contiguous, 0, static_cast<MPI_Aint>(extent), &type_);
  MPI_Type_free(&contiguous);
  if (code_ == MPI_SUCCESS) code_ = MPI_Type_commit(&type_);
}

StridedBytes::~StridedBytes() {
  if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
}

}  // namespace rlx::mpi
