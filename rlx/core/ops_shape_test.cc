#include <cmath>
#include <limits>
#include <numeric>

#include <gtest/gtest.h>

#include "rlx/core/eval.h"
#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::array_of;
using testing::expect_error;
using testing::unravel;

// 0, 1, 2, ... as T, in `shape`.
template <class T>
Array iota(const Shape& shape) {
  std::vector<T> values(static_cast<std::size_t>(numel(shape)));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<T>(i);
  return Array::from(values, shape);
}

TEST(Reshape, InfersOneDimensionAndSharesTheData) {
  const Array a = iota<float>({2, 6});
  const Array b = reshape(a, {3, -1});
  EXPECT_EQ(b.shape(), (Shape{3, 4}));
  eval(b);
  EXPECT_EQ(b.raw_data(), a.raw_data());  // no copy
  EXPECT_EQ(reshape(a, {12}).to_vector<float>(), a.to_vector<float>());
  EXPECT_EQ(reshape(Array::scalar(5.0f), {1, 1}).shape(), (Shape{1, 1}));
  expect_error<ShapeError>(
      [&] {
        reshape(a, {5, -1});
      },
      "reshape: cannot reshape (2, 6) into (5, -1)");
  expect_error<ShapeError>([&] { reshape(a, {-1, -1}); }, "reshape: cannot reshape");
  expect_error<ShapeError>([&] { reshape(a, {4, 4}); }, "(2, 6) into (4, 4)");
}

// Expects out[index] == a[index permuted by perm] for every output index.
template <class T>
void expect_transposed(const Array& a, const std::vector<int>& perm, const Array& out) {
  for (std::int64_t i = 0; i < out.size(); ++i) {
    const auto index = unravel(i, out.shape());
    std::vector<std::int64_t> source(index.size());
    for (std::size_t d = 0; d < perm.size(); ++d)
      source[static_cast<std::size_t>(perm[d])] = index[d];
    std::int64_t at = 0;
    for (std::size_t d = 0; d < source.size(); ++d) at = at * a.shape()[d] + source[d];
    ASSERT_EQ(out.data<T>()[static_cast<std::size_t>(i)], a.data<T>()[static_cast<std::size_t>(at)])
        << "at " << i;
  }
}

TEST(Transpose, PermutesAxesForEveryElementSize) {
  const Array m = iota<float>({3, 5});
  const Array t = transpose(m);
  EXPECT_EQ(t.shape(), (Shape{5, 3}));
  expect_transposed<float>(m, {1, 0}, t);
  const Array cube = iota<std::int64_t>({2, 3, 4});
  expect_transposed<std::int64_t>(cube, {2, 0, 1}, transpose(cube, {2, 0, 1}));
  expect_transposed<std::int64_t>(cube, {0, 2, 1}, transpose(cube, {0, -1, 1}));
  const Array bytes = iota<std::uint8_t>({4, 1, 7});
  expect_transposed<std::uint8_t>(bytes, {2, 1, 0}, transpose(bytes));
  const Array halves = array_of<float16_t>({6, 5}, 3);
  expect_transposed<float16_t>(halves, {1, 0}, transpose(halves));
  expect_error<ShapeError>(
      [&] {
        transpose(cube, {0, 1});
      },
      "transpose: 2 axes for shape (2, 3, 4)");
  expect_error<ShapeError>([&] { transpose(cube, {0, 1, 1}); }, "transpose: repeated axis");
}

TEST(Slice, TakesRangesWithSteps) {
  const Array a = iota<std::int32_t>({4, 6});
  EXPECT_EQ(slice(a, {1, 2}, {3, 5}).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{8, 9, 10, 14, 15, 16}));
  EXPECT_EQ(slice(a, {0, 1}, {4, 6}, {2, 3}).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{1, 4, 13, 16}));
  EXPECT_EQ(slice(a, {2, 0}, {2, 6}).shape(), (Shape{0, 6}));
  const Array d = iota<double>({3, 4, 5});
  const Array s = slice(d, {1, 0, 3}, {3, 4, 4});
  EXPECT_EQ(s.shape(), (Shape{2, 4, 1}));
  EXPECT_EQ(s.data<double>()[0], 23.0);  // element (1, 0, 3)
  EXPECT_EQ(s.data<double>()[7], 58.0);  // element (2, 3, 3)
  expect_error<ShapeError>([&] { slice(a, {0, 0}, {5, 1}); }, "do not fit shape (4, 6)");
  expect_error<ShapeError>([&] { slice(a, {0}, {1}); }, "slice: start (0), stop (1)");
  expect_error<ShapeError>([&] { slice(a, {0, 0}, {1, 1}, {1, 0}); }, "steps (1, 0)");
}

TEST(Concatenate, JoinsAlongAnyAxis) {
  const Array a = iota<float>({2, 3});
  const Array b = iota<float>({2, 1}) + 10.0;
  const Array c = iota<float>({2, 2}) + 20.0;
  EXPECT_EQ(concatenate({a, b, c}, 1).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 10, 20, 21, 3, 4, 5, 11, 22, 23}));
  EXPECT_EQ(concatenate({a, a}, 0).shape(), (Shape{4, 3}));
  EXPECT_EQ(concatenate({a, a}, -2).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
  const Array e = zeros({2, 0});
  EXPECT_EQ(concatenate({e, b, e}, 1).to_vector<float>(), (std::vector<float>{10, 11}));
  expect_error<ShapeError>(
      [&] {
        concatenate({a, c}, 0);
      },
      "concatenate: (2, 3) f32 and (2, 2) f32");
  expect_error<ShapeError>([&] { concatenate({a, zeros({2, 3}, Dtype::f64)}, 0); }, "f64");
  expect_error<ShapeError>([] { concatenate({}, 0); }, "concatenate: no arrays");
}

TEST(BroadcastTo, RepeatsAlongBroadcastDimensions) {
  const Array row = Array::from({1.0f, 2.0f, 3.0f}, {3});
  EXPECT_EQ(broadcast_to(row, {2, 3}).to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  const Array column = Array::from({1.0f, 2.0f}, {2, 1});
  EXPECT_EQ(broadcast_to(column, {2, 2}).to_vector<float>(), (std::vector<float>{1, 1, 2, 2}));
  expect_error<ShapeError>([&] { broadcast_to(column, {3, 2}); }, "broadcast_to");
  expect_error<ShapeError>([&] { broadcast_to(row, {3, 1}); }, "cannot broadcast (3) to (3, 1)");
}

TEST(Astype, ConvertsBetweenEveryPairOfDtypes) {
  const std::vector<double> values{0, 1, 2, 3, 4, 5};
  for (Dtype from : kAllDtypes) {
    const Array source = astype(Array::from(values, {2, 3}), from);
    for (Dtype to : kAllDtypes) {
      const Array out = astype(source, to);
      EXPECT_EQ(out.dtype(), to);
      const std::vector<double> back = astype(out, Dtype::f64).to_vector<double>();
      const bool boolean = from == Dtype::boolean || to == Dtype::boolean;
      for (std::size_t i = 0; i < values.size(); ++i) {
        EXPECT_EQ(back[i], boolean ? (i > 0 ? 1.0 : 0.0) : values[i])
            << name_of(from) << " -> " << name_of(to) << " at " << i;
      }
    }
  }
}

TEST(Astype, FloatToIntegerSaturatesAndTruncates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Array f = Array::from({-1.7f, 2.9f, 1e10f, -1e10f, nan, 300.0f}, {6});
  EXPECT_EQ(astype(f, Dtype::i32).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{-1, 2, std::numeric_limits<std::int32_t>::max(),
                                       std::numeric_limits<std::int32_t>::min(), 0, 300}));
  EXPECT_EQ(astype(f, Dtype::u8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{0, 2, 255, 0, 0, 255}));
  EXPECT_EQ(astype(f, Dtype::boolean).to_vector<bool>(),
            (std::vector<bool>{true, true, true, true, true, true}));
  EXPECT_EQ(static_cast<float>(astype(f, Dtype::bf16).data<bfloat16_t>()[1]), 2.90625f);
}

}  // namespace
}  // namespace rlx
