#include <cmath>
#include <functional>
#include <limits>

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

using ArrayFn2 = std::function<Array(const Array&, const Array&)>;
using RefFn2 = std::function<double(double, double)>;

struct BinaryCase {
  const char* name;
  ArrayFn2 op;
  RefFn2 reference;
  bool comparison = false;
};

double ref_div(double a, double b, bool integral) {
  if (!integral) return a / b;
  return b == 0 ? 0 : std::trunc(a / b);
}

std::vector<BinaryCase> binary_cases(bool integral) {
  return {
      {"add", add, [](double a, double b) { return a + b; }},
      {"sub", sub, [](double a, double b) { return a - b; }},
      {"mul", mul, [](double a, double b) { return a * b; }},
      {"div", div, [integral](double a, double b) { return ref_div(a, b, integral); }},
      {"maximum", maximum, [](double a, double b) { return std::max(a, b); }},
      {"minimum", minimum, [](double a, double b) { return std::min(a, b); }},
      {"greater", greater, [](double a, double b) { return a > b ? 1.0 : 0.0; }, true},
      {"less", less, [](double a, double b) { return a < b ? 1.0 : 0.0; }, true},
      {"equal", equal, [](double a, double b) { return a == b ? 1.0 : 0.0; }, true},
  };
}

// What an exact result looks like once stored as T (integers wrap).
template <class T>
double stored(double exact) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<double>(static_cast<T>(static_cast<std::int64_t>(exact)));
  } else {
    return exact;
  }
}

template <class T>
double tolerance() {
  if constexpr (std::same_as<T, float16_t>) return 1e-3;
  if constexpr (std::same_as<T, bfloat16_t>) return 8e-3;
  if constexpr (std::same_as<T, float>) return 1e-6;
  return 1e-12;
}

const std::vector<std::pair<Shape, Shape>> kShapePairs = {
    {{2, 3}, {2, 3}},    {{2, 3}, {3}},
    {{4, 1, 3}, {5, 1}}, {{}, {3, 2}},
    {{7}, {1}},          {{1, 5, 1}, {3, 1, 4}},
    {{0, 3}, {3}},       {{17, 33}, {17, 33}},
    {{3, 1}, {1, 3}},    {{2, 3, 1, 5}, {3, 4, 1}},
};

template <class T>
void check_binary_ops() {
  const bool integral = std::is_integral_v<T>;
  std::uint32_t seed = 1;
  for (const auto& [a_shape, b_shape] : kShapePairs) {
    const Array a = array_of<T>(a_shape, seed++);
    const Array b = array_of<T>(b_shape, seed++);
    const Shape shape = broadcast_shapes("test", a_shape, b_shape);
    for (const BinaryCase& c : binary_cases(integral)) {
      const std::string what = std::string(c.name) + " " + std::string(name_of(dtype_of<T>)) + " " +
                               to_string(a_shape) + " " + to_string(b_shape);
      const Array out = c.op(a, b);
      ASSERT_EQ(out.shape(), shape) << what;
      std::vector<double> expected;
      for (std::int64_t i = 0; i < numel(shape); ++i) {
        const auto index = unravel(i, shape);
        const double x = to_double(a.data<T>()[broadcast_position(index, a_shape)]);
        const double y = to_double(b.data<T>()[broadcast_position(index, b_shape)]);
        expected.push_back(c.comparison ? c.reference(x, y) : stored<T>(c.reference(x, y)));
      }
      if (c.comparison) {
        ASSERT_EQ(out.dtype(), Dtype::boolean) << what;
        expect_close(out.data<bool>(), expected, 0, what);
      } else {
        ASSERT_EQ(out.dtype(), dtype_of<T>) << what;
        expect_close(out.data<T>(), expected, tolerance<T>(), what);
      }
    }
  }
}

TEST(Elementwise, BinaryOpsMatchAReferenceLoopWithBroadcasting) {
  check_binary_ops<float>();
  check_binary_ops<double>();
  check_binary_ops<float16_t>();
  check_binary_ops<bfloat16_t>();
  check_binary_ops<std::int32_t>();
  check_binary_ops<std::int64_t>();
  check_binary_ops<std::uint8_t>();
}

TEST(Elementwise, ComparisonsMaximumAndMinimumWorkOnBool) {
  const Array a = Array::from(std::vector<bool>{true, false, true, false}, {4});
  const Array b = Array::from(std::vector<bool>{true, true, false, false}, {4});
  EXPECT_EQ(maximum(a, b).to_vector<bool>(), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(minimum(a, b).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(equal(a, b).to_vector<bool>(), (std::vector<bool>{true, false, false, true}));
}

TEST(Elementwise, IntegerArithmeticWrapsAndDivisionByZeroGivesZero) {
  constexpr auto kMin = std::numeric_limits<std::int32_t>::min();
  constexpr auto kMax = std::numeric_limits<std::int32_t>::max();
  const Array a = Array::from<std::int32_t>({kMax, kMin, 7, -7}, {4});
  const Array b = Array::from<std::int32_t>({1, -1, 0, 2}, {4});
  EXPECT_EQ((a + b).to_vector<std::int32_t>(), (std::vector<std::int32_t>{kMin, kMax, 7, -5}));
  EXPECT_EQ((a / b).to_vector<std::int32_t>(), (std::vector<std::int32_t>{kMax, kMin, 0, -3}));
  EXPECT_EQ((a * b).to_vector<std::int32_t>(), (std::vector<std::int32_t>{kMax, kMin, 0, -14}));
  const Array u = Array::from<std::uint8_t>({1, 250}, {2});
  EXPECT_EQ((u - 3.0).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{254, 247}));
  EXPECT_EQ((u + 10.0).to_vector<std::uint8_t>(), (std::vector<std::uint8_t>{11, 4}));
}

struct UnaryCase {
  const char* name;
  std::function<Array(const Array&)> op;
  std::function<double(double)> reference;
  bool integers_too = false;
};

const std::vector<UnaryCase> kUnaryCases = {
    {"neg", neg, [](double x) { return -x; }, true},
    {"relu", relu, [](double x) { return x > 0 ? x : 0; }, true},
    {"exp", exp, [](double x) { return std::exp(x); }},
    {"log", log, [](double x) { return std::log(x); }},  // NaN below zero
    {"tanh", tanh, [](double x) { return std::tanh(x); }},
    {"gelu", gelu, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
    {"sqrt", sqrt, [](double x) { return std::sqrt(x); }},
};

template <class T>
void check_unary_ops(const Shape& shape) {
  const Array a = array_of<T>(shape, 7);
  for (const UnaryCase& c : kUnaryCases) {
    if (std::is_integral_v<T> && !c.integers_too) continue;
    const std::string what = std::string(c.name) + " " + std::string(name_of(dtype_of<T>));
    const Array out = c.op(a);
    ASSERT_EQ(out.shape(), shape) << what;
    ASSERT_EQ(out.dtype(), dtype_of<T>) << what;
    std::vector<double> expected;
    for (T x : a.data<T>()) expected.push_back(stored<T>(c.reference(to_double(x))));
    expect_close(out.data<T>(), expected, 4 * tolerance<T>() + 1e-7, what);
  }
}

TEST(Elementwise, UnaryOpsMatchAReferenceLoop) {
  check_unary_ops<float>({5, 7});
  check_unary_ops<double>({33});
  check_unary_ops<float16_t>({2, 9});
  check_unary_ops<bfloat16_t>({11});
  check_unary_ops<std::int32_t>({3, 3});
  check_unary_ops<std::int64_t>({4});
  check_unary_ops<std::uint8_t>({6});
  check_unary_ops<float>({0, 4});
}

TEST(Elementwise, PlainNumbersTakeTheArraysDtype) {
  const Array a = Array::from<std::int32_t>({2, 4}, {2});
  const Array b = Array::from({2.0, 4.0}, {2});
  EXPECT_EQ((a * 2.0).to_vector<std::int32_t>(), (std::vector<std::int32_t>{4, 8}));
  EXPECT_EQ((1.0 - b).to_vector<double>(), (std::vector<double>{-1, -3}));
  EXPECT_EQ((8.0 / b).to_vector<double>(), (std::vector<double>{4, 2}));
  EXPECT_EQ((b / 2.0 + 1.0).to_vector<double>(), (std::vector<double>{2, 3}));
  EXPECT_EQ((-b).to_vector<double>(), (std::vector<double>{-2, -4}));
  EXPECT_EQ((2.0 + b * b).dtype(), Dtype::f64);
}

TEST(Elementwise, MismatchesAreReportedWhenTheOpIsCalled) {
  const Array f = Array::from({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  const Array d = Array::from({1.0, 2.0, 3.0}, {3});
  expect_error<ShapeError>(
      [&] {
        add(f, Array::from({1.0f, 2.0f, 3.0f, 4.0f}, {4}));
      },
      "add: shapes (2, 3) and (4) cannot be broadcast together");
  expect_error<Error>([&] { mul(f, d); }, "mul: dtypes differ: f32 and f64");
  const Array flags = Array::from(std::vector<bool>{true}, {1});
  expect_error<Error>([&] { add(flags, flags); }, "add: not defined for bool");
  expect_error<Error>([] { exp(Array::from<std::int32_t>({1}, {1})); },
                      "exp: needs a floating dtype, got i32");
  expect_error<Error>([&] { neg(flags); }, "neg: not defined for bool");
}

}  // namespace
}  // namespace rlx
