#include <cmath>

#include <gtest/gtest.h>

#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::expect_error;

TEST(Creation, FullZerosOnesInEveryDtype) {
  for (Dtype dtype : kAllDtypes) {
    const Array a = full({2, 3}, 3.0, dtype);
    EXPECT_FALSE(a.is_evaluated());  // lazy like every op
    EXPECT_EQ(a.shape(), (Shape{2, 3}));
    EXPECT_EQ(a.dtype(), dtype);
    const double expected = dtype == Dtype::boolean ? 1.0 : 3.0;
    EXPECT_EQ(astype(a, Dtype::f64).to_vector<double>(), std::vector<double>(6, expected));
    EXPECT_EQ(sum(astype(zeros({4}, dtype), Dtype::f64)).item<double>(), 0.0);
    EXPECT_EQ(sum(astype(ones({4}, dtype), Dtype::f64)).item<double>(), 4.0);
  }
  EXPECT_EQ(full({}, 2.5).item<float>(), 2.5f);
  expect_error<ShapeError>([] { zeros({2, -3}); }, "full: negative dimension in shape (2, -3)");
}

TEST(Creation, ArangeCountsLikeNumpy) {
  EXPECT_EQ(arange(0, 5).to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(1, 2, 0.25, Dtype::f64).to_vector<double>(),
            (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(arange(5, 0, -2, Dtype::i32).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{5, 3, 1}));
  EXPECT_EQ(arange(3, 1).shape(), (Shape{0}));
  expect_error<Error>([] { arange(0, 1, 0); }, "arange: start, stop and step must be finite");
}

// Mean and standard deviation of the elements.
std::pair<double, double> moments(const Array& a) {
  const auto values = astype(a, Dtype::f64).to_vector<double>();
  double sum = 0;
  double squares = 0;
  for (double x : values) {
    sum += x;
    squares += x * x;
  }
  const double n = static_cast<double>(values.size());
  return {sum / n, std::sqrt(squares / n - (sum / n) * (sum / n))};
}

TEST(Random, UniformIsSeededInRangeAndEvenlySpread) {
  const Array a = random_uniform({100, 100}, -2.0, 6.0, 42);
  const Array again = random_uniform({100, 100}, -2.0, 6.0, 42);
  const Array other = random_uniform({100, 100}, -2.0, 6.0, 43);
  EXPECT_EQ(a.to_vector<float>(), again.to_vector<float>());
  EXPECT_NE(a.to_vector<float>(), other.to_vector<float>());
  for (float x : a.data<float>()) {
    ASSERT_GE(x, -2.0f);
    ASSERT_LE(x, 6.0f);
  }
  const auto [mean, stddev] = moments(a);
  EXPECT_NEAR(mean, 2.0, 0.05);
  EXPECT_NEAR(stddev, 8.0 / std::sqrt(12.0), 0.05);
  // Element i depends on the seed and i only, not on the shape.
  EXPECT_EQ(random_uniform({3}, 0, 1, 7).to_vector<float>(),
            slice(random_uniform({2, 5}, 0, 1, 7), {0, 0}, {1, 3}).to_vector<float>());
}

TEST(Random, NormalIsSeededWithTheRequestedMoments) {
  const Array a = random_normal({200, 100}, 1.5, 0.5, 9, Dtype::f64);
  EXPECT_EQ(a.to_vector<double>(),
            random_normal({200, 100}, 1.5, 0.5, 9, Dtype::f64).to_vector<double>());
  const auto [mean, stddev] = moments(a);
  EXPECT_NEAR(mean, 1.5, 0.01);
  EXPECT_NEAR(stddev, 0.5, 0.01);
  const auto [half_mean, half_stddev] = moments(random_normal({4000}, 0, 1, 3, Dtype::bf16));
  EXPECT_NEAR(half_mean, 0.0, 0.06);
  EXPECT_NEAR(half_stddev, 1.0, 0.06);
  expect_error<Error>([] { random_normal({2}, 0, 1, 0, Dtype::i32); },
                      "random_normal: needs a floating dtype, got i32");
}

}  // namespace
}  // namespace rlx
