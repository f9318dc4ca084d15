// Matrix product. f32 and f64 call OpenBLAS directly on the input buffers and
// write straight into the output buffer (no copies); other dtypes use a plain
// i-k-j loop.
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include <cblas.h>

#include "rlx/core/custom.h"
#include "rlx/core/error.h"
#include "rlx/core/kernel_util.h"
#include "rlx/core/op_checks.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

// c (m x n) = a (m x k) * b (k x n), all row-major and contiguous, m, n, k > 0.
template <class T>
void gemm(const T* a, const T* b, T* c, std::int64_t m, std::int64_t n, std::int64_t k) {
  const auto bm = static_cast<blasint>(m);
  const auto bn = static_cast<blasint>(n);
  const auto bk = static_cast<blasint>(k);
  if constexpr (std::same_as<T, float>) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bm, bn, bk, 1.0f, a, bk, b, bn, 0.0f, c,
                bn);
  } else if constexpr (std::same_as<T, double>) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bm, bn, bk, 1.0, a, bk, b, bn, 0.0, c,
                bn);
  } else {
    thread_local std::vector<detail::accumulator_t<T>> row;  // kept: runs allocate nothing
    row.resize(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < m; ++i) {
      std::fill(row.begin(), row.end(), detail::accumulator_t<T>{0});
      for (std::int64_t p = 0; p < k; ++p) {
        const auto scale = detail::to_accumulator(a[i * k + p]);
        const T* b_row = b + p * n;
        for (std::int64_t j = 0; j < n; ++j) row[j] += scale * detail::to_accumulator(b_row[j]);
      }
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] = detail::from_accumulator<T>(row[j]);
    }
  }
}

// Where each of the `batch` products reads its operands: matrix indices into
// a and b (broadcast batch dimensions repeat the same matrix).
struct BatchPlan {
  std::vector<std::int64_t> a_index;
  std::vector<std::int64_t> b_index;
};

BatchPlan plan_batches(const Shape& a_batch, const Shape& b_batch, const Shape& batch) {
  BatchPlan plan;
  const Strides a_strides = broadcast_strides(a_batch, batch);
  const Strides b_strides = broadcast_strides(b_batch, batch);
  const Strides out_strides = row_major_strides(batch);
  for (std::int64_t i = 0; i < numel(batch); ++i) {
    std::int64_t a_at = 0;
    std::int64_t b_at = 0;
    for (std::size_t d = 0; d < batch.size(); ++d) {
      const std::int64_t coord = i / out_strides[d] % batch[d];
      a_at += coord * a_strides[d];
      b_at += coord * b_strides[d];
    }
    plan.a_index.push_back(a_at);
    plan.b_index.push_back(b_at);
  }
  return plan;
}

template <class T>
CustomCompute matmul_compute(const Shape& a_shape, const Shape& b_shape, const Shape& batch) {
  const std::int64_t m = a_shape[a_shape.size() - 2];
  const std::int64_t k = a_shape.back();
  const std::int64_t n = b_shape.back();
  const Shape a_batch(a_shape.begin(), a_shape.end() - 2);
  const Shape b_batch(b_shape.begin(), b_shape.end() - 2);
  // One matrix b shared by every batch of a: a single (batch * m) x k product.
  const bool fold = numel(b_batch) == 1 && a_batch == batch;
  const std::int64_t rows = fold ? numel(batch) * m : m;
  BatchPlan plan = fold ? BatchPlan{{0}, {0}} : plan_batches(a_batch, b_batch, batch);
  return [plan = std::move(plan), rows, m, n, k](std::span<const Array> in, Array& out) {
    T* c = out.mutable_data<T>().data();
    if (out.size() == 0) return;
    if (k == 0) {
      std::fill(c, c + out.size(), T{});
      return;
    }
    const T* a = in[0].data<T>().data();
    const T* b = in[1].data<T>().data();
    for (std::size_t i = 0; i < plan.a_index.size(); ++i) {
      gemm<T>(a + plan.a_index[i] * m * k, b + plan.b_index[i] * k * n,
              c + static_cast<std::int64_t>(i) * rows * n, rows, n, k);
    }
  };
}

std::string operands(const Array& a, const Array& b) {
  return to_string(a.shape()) + " x " + to_string(b.shape());
}

void check_matmul(const Array& a, const Array& b) {
  if (a.ndim() < 2 || b.ndim() < 2) {
    throw ShapeError("matmul: operands need at least 2 dimensions: " + operands(a, b));
  }
  if (a.dim(-1) != b.dim(-2)) {
    throw ShapeError("matmul: inner dimensions differ: " + operands(a, b));
  }
  detail::check_same_dtype("matmul", a, b);
  detail::check_not_bool("matmul", a.dtype());
  for (std::int64_t dim : {a.dim(-2), a.dim(-1), b.dim(-1)}) {
    if (dim > INT_MAX) throw ShapeError("matmul: dimension too large for BLAS: " + operands(a, b));
  }
}

}  // namespace

Array matmul(const Array& a, const Array& b) {
  check_matmul(a, b);
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2);
  const Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  Shape shape;
  try {
    shape = broadcast_shapes("matmul", a_batch, b_batch);
  } catch (const ShapeError&) {
    throw ShapeError("matmul: batch dimensions do not broadcast: " + operands(a, b));
  }
  const Shape batch = shape;
  shape.push_back(a.dim(-2));
  shape.push_back(b.dim(-1));
  CustomCompute compute = dispatch_dtype(a.dtype(), [&](auto tag) {
    return matmul_compute<decltype(tag)>(a.shape(), b.shape(), batch);
  });
  return make_local_custom("matmul", std::move(shape), a.dtype(), {a, b}, std::move(compute));
}

}  // namespace rlx
