#include "bindings/torch/tensors.h"

#include <c10/util/Exception.h>

namespace rlx::torch_backend {
namespace {

// The rlx dtype holding a torch dtype's values exactly, if any.
std::optional<Dtype> same_values(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return Dtype::f32;
    case at::kDouble:
      return Dtype::f64;
    case at::kHalf:
      return Dtype::f16;
    case at::kBFloat16:
      return Dtype::bf16;
    case at::kInt:
      return Dtype::i32;
    case at::kLong:
      return Dtype::i64;
    case at::kByte:
      return Dtype::u8;
    case at::kBool:
      return Dtype::boolean;
    default:
      return std::nullopt;
  }
}

std::optional<ReduceOp> rlx_op(c10d::ReduceOp::RedOpType op, at::ScalarType type) {
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG:
      return ReduceOp::sum;
    case c10d::ReduceOp::PRODUCT:
      return ReduceOp::prod;
    case c10d::ReduceOp::MIN:
      return ReduceOp::min;
    case c10d::ReduceOp::MAX:
      return ReduceOp::max;
    // On bools, and is min and or is max.
    case c10d::ReduceOp::BAND:
      return type == at::kBool ? std::optional(ReduceOp::min) : std::nullopt;
    case c10d::ReduceOp::BOR:
      return type == at::kBool ? std::optional(ReduceOp::max) : std::nullopt;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::string dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return "float32";
    case at::kDouble:
      return "float64";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kChar:
      return "int8";
    case at::kShort:
      return "int16";
    case at::kInt:
      return "int32";
    case at::kLong:
      return "int64";
    case at::kByte:
      return "uint8";
    case at::kBool:
      return "bool";
    default:
      return at::toString(type);
  }
}

namespace {

const char* name_of(c10d::ReduceOp::RedOpType op) {
  constexpr const char* kNames[] = {"SUM",  "AVG", "PRODUCT", "MIN",       "MAX",
                                    "BAND", "BOR", "BXOR",    "PREMUL_SUM"};
  return op < std::size(kNames) ? kNames[op] : "an unknown op";
}

}  // namespace

void check_dense_cpu(const at::Tensor& tensor, std::string_view call) {
  TORCH_CHECK(tensor.device().is_cpu(), "rlx: ", call, " takes CPU tensors, not ",
              tensor.device().str(), " ones (move them with .cpu(), or use nccl for GPUs)");
  TORCH_CHECK(tensor.layout() == at::kStrided, "rlx: ", call,
              " takes dense tensors, not sparse ones (call .to_dense() first)");
}

Reduction reduction_for(const at::Tensor& tensor, const c10d::ReduceOp& op, std::string_view call) {
  const at::ScalarType type = tensor.scalar_type();
  const auto kind = static_cast<c10d::ReduceOp::RedOpType>(op);
  const std::optional<ReduceOp> reduce = rlx_op(kind, type);
  std::optional<Dtype> dtype = same_values(type);
  // Sums and products wrap the same in int8 as in uint8 (two's complement).
  if (type == at::kChar && (reduce == ReduceOp::sum || reduce == ReduceOp::prod)) dtype = Dtype::u8;
  const bool average = kind == c10d::ReduceOp::AVG;
  TORCH_CHECK(reduce && dtype && !(average && !at::isFloatingType(type)), "rlx: ", call,
              " cannot reduce ", dtype_name(type), " tensors by ", name_of(kind),
              ": rlx reduces float32/64, float16, bfloat16, int32/64 and uint8 by SUM, PRODUCT, "
              "MIN and MAX (AVG on floating types; int8 by SUM and PRODUCT; bool by "
              "SUM/MAX/BOR and PRODUCT/MIN/BAND)");
  return {*reduce, *dtype, average};
}

ElementSpan elements_of(at::Tensor& tensor, Dtype dtype) {
  return {tensor.data_ptr(), static_cast<std::size_t>(tensor.numel()), dtype};
}

std::span<std::byte> bytes_of(at::Tensor& tensor) {
  return {static_cast<std::byte*>(tensor.data_ptr()), tensor.nbytes()};
}

std::span<const std::byte> bytes_of(const at::Tensor& tensor) {
  return {static_cast<const std::byte*>(tensor.data_ptr()), tensor.nbytes()};
}

Dense::Dense(const at::Tensor& tensor)
    : caller_(tensor), dense_(tensor.is_contiguous() ? tensor : tensor.contiguous()) {}

void Dense::write_back() {
  if (!dense_.is_same(caller_)) caller_.copy_(dense_);
}

}  // namespace rlx::torch_backend
