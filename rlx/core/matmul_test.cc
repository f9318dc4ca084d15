#include <gtest/gtest.h>

#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::array_of;
using testing::broadcast_position;
using testing::expect_close;
using testing::expect_error;
using testing::to_double;
using testing::unravel;

// (..., m, k) x (..., k, n) with a triple loop per broadcast batch, in double
// (integers wrap to T at the end).
template <class T>
std::vector<double> reference(const Array& a, const Array& b, const Shape& out_shape) {
  const std::int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  const Shape batch(out_shape.begin(), out_shape.end() - 2);
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2);
  const Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  std::vector<double> out;
  for (std::int64_t i = 0; i < numel(batch); ++i) {
    const auto index = unravel(i, batch);
    const std::int64_t a_at = broadcast_position(index, a_batch) * m * k;
    const std::int64_t b_at = broadcast_position(index, b_batch) * k * n;
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t c = 0; c < n; ++c) {
        double acc = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          acc += to_double(a.data<T>()[static_cast<std::size_t>(a_at + r * k + p)]) *
                 to_double(b.data<T>()[static_cast<std::size_t>(b_at + p * n + c)]);
        }
        if constexpr (std::is_integral_v<T>) {
          acc = static_cast<double>(static_cast<T>(static_cast<std::int64_t>(acc)));
        }
        out.push_back(acc);
      }
    }
  }
  return out;
}

template <class T>
void check_matmul(double tolerance) {
  const std::vector<std::tuple<Shape, Shape, Shape>> cases = {
      {{1, 1}, {1, 1}, {1, 1}},
      {{3, 5}, {5, 7}, {3, 7}},
      {{17, 1}, {1, 9}, {17, 9}},
      {{64, 33}, {33, 65}, {64, 65}},
      {{2, 3, 4, 5}, {2, 3, 5, 6}, {2, 3, 4, 6}},  // batched
      {{4, 3, 5}, {5, 2}, {4, 3, 2}},              // one b for every batch of a
      {{1, 3, 5}, {4, 5, 2}, {4, 3, 2}},           // a broadcast over b's batch
      {{2, 1, 3, 4}, {1, 5, 4, 2}, {2, 5, 3, 2}},  // both broadcast
      {{3, 0}, {0, 4}, {3, 4}},                    // k = 0: zeros
      {{0, 3}, {3, 4}, {0, 4}},
  };
  std::uint32_t seed = 5;
  for (const auto& [a_shape, b_shape, out_shape] : cases) {
    const Array a = array_of<T>(a_shape, seed++, 2.0);
    const Array b = array_of<T>(b_shape, seed++, 2.0);
    const std::string what =
        std::string(name_of(dtype_of<T>)) + " " + to_string(a_shape) + " x " + to_string(b_shape);
    const Array out = matmul(a, b);
    ASSERT_EQ(out.shape(), out_shape) << what;
    ASSERT_EQ(out.dtype(), dtype_of<T>) << what;
    expect_close(out.data<T>(), reference<T>(a, b, out_shape), tolerance, what);
  }
}

TEST(Matmul, MatchesATripleLoopForEveryDtypeAndBatchLayout) {
  check_matmul<float>(1e-5);
  check_matmul<double>(1e-12);
  check_matmul<float16_t>(2e-3);
  check_matmul<bfloat16_t>(1e-2);
  check_matmul<std::int32_t>(0);
  check_matmul<std::int64_t>(0);
  check_matmul<std::uint8_t>(0);
}

TEST(Matmul, ShapeErrorsNameTheOpAndBothShapes) {
  expect_error<ShapeError>(
      [] {
        matmul(zeros({2, 3}), zeros({4, 5}));
      },
      "matmul: inner dimensions differ: (2, 3) x (4, 5)");
  expect_error<ShapeError>(
      [] {
        matmul(zeros({3}), zeros({3, 2}));
      },
      "matmul: operands need at least 2 dimensions: (3) x (3, 2)");
  expect_error<ShapeError>(
      [] {
        matmul(zeros({2, 2, 3}), zeros({3, 3, 4}));
      },
      "matmul: batch dimensions do not broadcast: (2, 2, 3) x (3, 3, 4)");
  expect_error<Error>(
      [] {
        matmul(zeros({2, 2}), zeros({2, 2}, Dtype::f64));
      },
      "matmul: dtypes differ: f32 and f64");
}

}  // namespace
}  // namespace rlx
