// How torch's CPU tensors meet rlx's spans: the element type a reduction
// runs in, and a dense copy for a tensor that is not contiguous.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "rlx/transport/transport.h"

namespace rlx::torch_backend {

// A reduction as rlx runs it: the op, the dtype its bytes are reduced in,
// and whether the result is then divided by the group's size (AVG).
struct Reduction {
  ReduceOp op;
  Dtype dtype;
  bool average = false;
};

// A dtype as Python spells it: "float32", "int8", ...
std::string dtype_name(at::ScalarType type);

// Throws c10::Error (Python's RuntimeError) naming `call` when `tensor` is
// not a dense CPU tensor.
void check_dense_cpu(const at::Tensor& tensor, std::string_view call);

// The reduction of `op` over `tensor`'s dtype; throws c10::Error naming both
// when rlx cannot run it (BXOR, PREMUL_SUM, min of int8, ...).
Reduction reduction_for(const at::Tensor& tensor, const c10d::ReduceOp& op, std::string_view call);

// A contiguous tensor's elements, as `dtype`, and its bytes.
ElementSpan elements_of(at::Tensor& tensor, Dtype dtype);
std::span<std::byte> bytes_of(at::Tensor& tensor);
std::span<const std::byte> bytes_of(const at::Tensor& tensor);

// The tensor a call works on: the caller's when it is contiguous, else a
// contiguous copy that write_back() copies into the caller's.
class Dense {
 public:
  explicit Dense(const at::Tensor& tensor);
  at::Tensor& get() { return dense_; }
  void write_back();

 private:
  at::Tensor caller_;
  at::Tensor dense_;
};

}  // namespace rlx::torch_backend
