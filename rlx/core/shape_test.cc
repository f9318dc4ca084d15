#include "rlx/core/shape.h"

#include <gtest/gtest.h>

#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::expect_error;

TEST(Shape, CountsFormatsAndStrides) {
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(numel({2, 3, 4}), 24);
  EXPECT_EQ(numel({2, 0}), 0);
  EXPECT_EQ(to_string({}), "()");
  EXPECT_EQ(to_string({2, 3}), "(2, 3)");
  EXPECT_EQ(row_major_strides({2, 3, 4}), (Strides{12, 4, 1}));
}

TEST(Shape, BroadcastsLikeNumpy) {
  EXPECT_EQ(broadcast_shapes("t", {2, 3}, {3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes("t", {4, 1, 3}, {5, 1}), (Shape{4, 5, 3}));
  EXPECT_EQ(broadcast_shapes("t", {}, {2}), (Shape{2}));
  EXPECT_EQ(broadcast_shapes("t", {0, 1}, {1, 3}), (Shape{0, 3}));
  EXPECT_EQ(broadcast_strides({3, 1}, {2, 3, 4}), (Strides{0, 1, 0}));
  expect_error<ShapeError>(
      [] {
        broadcast_shapes("add", {2, 3}, {4});
      },
      "add: shapes (2, 3) and (4) cannot be broadcast");
}

TEST(Shape, NormalizesAxesAndRejectsBadOnes) {
  EXPECT_EQ(normalize_axis("t", -1, 3), 2);
  EXPECT_EQ(normalize_axes("t", std::vector{2, -3}, 3), (std::vector{0, 2}));
  expect_error<ShapeError>([] { normalize_axis("sum", 3, 3); }, "sum: axis 3 is out of range");
  expect_error<ShapeError>([] { normalize_axes("sum", std::vector{1, -2}, 3); }, "repeated axis");
  expect_error<ShapeError>([] { check_shape("full", {2, -1}); }, "full: negative dimension");
}

}  // namespace
}  // namespace rlx
