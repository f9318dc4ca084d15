#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::array_of;
using testing::expect_close;
using testing::expect_error;
using testing::to_double;
using testing::unravel;

enum class Kind { sum, mean, max };

// Reduces `a` over `axes` with doubles, one output at a time.
template <class T>
std::vector<double> reference(Kind kind, const Array& a, std::vector<int> axes, Shape* shape) {
  for (int& axis : axes) axis = axis < 0 ? axis + a.ndim() : axis;
  auto reduced = [&](std::size_t d) {
    return std::find(axes.begin(), axes.end(), static_cast<int>(d)) != axes.end();
  };
  shape->clear();
  for (std::size_t d = 0; d < a.shape().size(); ++d) {
    if (!reduced(d)) shape->push_back(a.shape()[d]);
  }
  const double init = kind == Kind::max ? -std::numeric_limits<double>::infinity() : 0.0;
  std::vector<double> out(static_cast<std::size_t>(numel(*shape)), init);
  std::vector<std::int64_t> counts(out.size(), 0);
  for (std::int64_t i = 0; i < a.size(); ++i) {
    const auto index = unravel(i, a.shape());
    std::int64_t at = 0;
    for (std::size_t d = 0; d < index.size(); ++d) {
      if (!reduced(d)) at = at * a.shape()[d] + index[d];
    }
    const double x = to_double(a.data<T>()[static_cast<std::size_t>(i)]);
    auto& slot = out[static_cast<std::size_t>(at)];
    slot = kind == Kind::max ? std::max(slot, x) : slot + x;
    ++counts[static_cast<std::size_t>(at)];
  }
  for (std::size_t j = 0; j < out.size(); ++j) {
    if (kind == Kind::mean) out[j] /= static_cast<double>(counts[j]);
    if constexpr (std::is_integral_v<T>) {  // integer sums wrap in T
      out[j] = static_cast<double>(static_cast<T>(static_cast<std::int64_t>(out[j])));
    }
  }
  return out;
}

Array apply(Kind kind, const Array& a, const std::vector<int>& axes, bool keepdims) {
  switch (kind) {
    case Kind::sum:
      return sum(a, axes, keepdims);
    case Kind::mean:
      return mean(a, axes, keepdims);
    case Kind::max:
      break;
  }
  return max(a, axes, keepdims);
}

template <class T>
void check_reductions(const std::vector<Kind>& kinds, double tolerance) {
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{3, 4, 5}, {}},     {{3, 4, 5}, {0}},    {{3, 4, 5}, {1}},    {{3, 4, 5}, {-1}},
      {{3, 4, 5}, {0, 1}}, {{3, 4, 5}, {1, 2}}, {{3, 4, 5}, {0, 2}}, {{3, 4, 5}, {2, 0, 1}},
      {{7, 13}, {1}},      {{7, 13}, {0}},      {{37}, {0}},         {{2, 3, 4, 5}, {1, 3}},
      {{1, 1}, {0, 1}},    {{2, 0, 3}, {2}},    {{200}, {0}},
  };
  std::uint32_t seed = 11;
  for (Kind kind : kinds) {
    for (const auto& [shape, axes] : cases) {
      for (bool keepdims : {false, true}) {
        const Array a = array_of<T>(shape, seed++);
        const std::string what = std::string(name_of(dtype_of<T>)) + " " + to_string(shape) +
                                 " kind " + std::to_string(static_cast<int>(kind)) + " keepdims " +
                                 std::to_string(keepdims) + " axes " + std::to_string(axes.size());
        Shape expected_shape;
        const std::vector<double> expected = reference<T>(kind, a, axes, &expected_shape);
        if (keepdims) {
          expected_shape = shape;
          for (int axis : axes)
            expected_shape[static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(shape.size())
                                                             : axis)] = 1;
        }
        const Array out = apply(kind, a, axes, keepdims);
        EXPECT_EQ(out.shape(), expected_shape) << what;
        EXPECT_EQ(out.dtype(), dtype_of<T>) << what;
        expect_close(out.data<T>(), expected, tolerance, what);
      }
    }
  }
}

TEST(Reduce, SumMeanAndMaxMatchAReferenceLoopOverAnyAxes) {
  check_reductions<float>({Kind::sum, Kind::mean, Kind::max}, 1e-5);
  check_reductions<double>({Kind::sum, Kind::mean, Kind::max}, 1e-12);
  check_reductions<float16_t>({Kind::sum, Kind::mean, Kind::max}, 2e-3);
  check_reductions<bfloat16_t>({Kind::sum, Kind::max}, 1e-2);
  check_reductions<std::int32_t>({Kind::sum, Kind::max}, 0);
  check_reductions<std::int64_t>({Kind::sum, Kind::max}, 0);
  check_reductions<std::uint8_t>({Kind::sum, Kind::max}, 0);
}

TEST(Reduce, WholeArrayAndSingleAxisForms) {
  const Array a = Array::from({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  EXPECT_EQ(sum(a).shape(), Shape{});
  EXPECT_EQ(sum(a).item<float>(), 21.0f);
  EXPECT_EQ(mean(a).item<float>(), 3.5f);
  EXPECT_EQ(max(a).item<float>(), 6.0f);
  EXPECT_EQ(sum(a, 0).to_vector<float>(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(mean(a, -1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(max(a, 1).to_vector<float>(), (std::vector<float>{3, 6}));
  EXPECT_EQ(max(Array::from(std::vector<bool>{false, true}, {2})).item<bool>(), true);
}

TEST(Reduce, EmptyAxesAndNaN) {
  const Array empty = zeros({2, 0});
  EXPECT_EQ(sum(empty, 1).to_vector<float>(), (std::vector<float>{0, 0}));
  EXPECT_TRUE(std::isnan(mean(empty, 1).to_vector<float>()[0]));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(max(Array::from({1.0f, nan, 3.0f}, {3})).item<float>()));
  expect_error<ShapeError>([&] { max(empty, 1); }, "max: cannot reduce the empty axis 1 of (2, 0)");
}

TEST(Reduce, BadAxesAndDtypesAreReportedWhenCalled) {
  const Array a = zeros({2, 3});
  expect_error<ShapeError>([&] { sum(a, 2); }, "sum: axis 2 is out of range");
  expect_error<ShapeError>([&] { mean(a, std::vector{0, -2}); }, "mean: repeated axis");
  expect_error<Error>([] { mean(zeros({2}, Dtype::i32)); },
                      "mean: needs a floating dtype, got i32");
  expect_error<Error>([] { sum(zeros({2}, Dtype::boolean)); }, "sum: not defined for bool");
}

}  // namespace
}  // namespace rlx
