#include "rlx/core/array.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::expect_error;

TEST(Array, CopiesHostDataAndReadsItBackTyped) {
  std::vector<float> values{1, 2, 3, 4, 5, 6};
  Array a = Array::from(values, {2, 3});
  values[0] = 100;  // the array has its own copy
  EXPECT_TRUE(a.is_evaluated());
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.dim(-1), 3);
  EXPECT_EQ(a.ndim(), 2);
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.nbytes(), 24u);
  EXPECT_EQ(a.dtype(), Dtype::f32);
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.raw_data()) % kBufferAlignment, 0u);
}

TEST(Array, MakesEveryDtypeAndScalars) {
  EXPECT_EQ(Array::from({1.5, 2.5}, {2}).to_vector<double>(), (std::vector{1.5, 2.5}));
  EXPECT_EQ(Array::from(std::vector<bool>{true, false, true}, {3}).to_vector<bool>(),
            (std::vector<bool>{true, false, true}));
  EXPECT_EQ(Array::from<std::int64_t>({-1, 7}, {2, 1}).data<std::int64_t>()[1], 7);
  EXPECT_EQ(static_cast<float>(Array::scalar(float16_t(0.5f)).item<float16_t>()), 0.5f);
  EXPECT_EQ(Array::scalar(std::uint8_t{9}).shape(), Shape{});
  EXPECT_EQ(Array::from_bytes("\x01\x02", {2}, Dtype::u8).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{1, 2}));
}

TEST(Array, AdoptsABufferAndFreesItWithTheLastHandle) {
  int freed = 0;
  auto* data = static_cast<std::int32_t*>(std::malloc(3 * sizeof(std::int32_t)));
  data[0] = 4;
  data[1] = 5;
  data[2] = 6;
  {
    Array a = Array::adopt(data, {3}, Dtype::i32, [&freed](void* p) {
      std::free(p);
      ++freed;
    });
    Array copy = a;
    EXPECT_EQ(a.data<std::int32_t>().data(), data);  // no copy
    EXPECT_EQ(copy.to_vector<std::int32_t>(), (std::vector<std::int32_t>{4, 5, 6}));
    EXPECT_EQ(freed, 0);
  }
  EXPECT_EQ(freed, 1);
}

TEST(Array, AdoptsAVectorWithoutCopying) {
  std::vector<double> values{1, 2, 3, 4};
  const double* storage = values.data();
  Array a = Array::adopt(std::move(values), {2, 2});
  EXPECT_EQ(a.data<double>().data(), storage);
  EXPECT_EQ(a.to_vector<double>(), (std::vector<double>{1, 2, 3, 4}));
}

TEST(Array, ReportsMisuseClearly) {
  expect_error<ShapeError>([] { Array::from({1.0f, 2.0f}, {3}); }, "2 values for shape (3)");
  expect_error<Error>([] { Array::from({1.0f}, {1}).data<double>(); },
                      "requested f64 elements of a f32 array");
  expect_error<ShapeError>(
      [] {
        Array::from({1.0f, 2.0f}, {2}).item<float>();
      },
      "item: the array has shape (2)");
  expect_error<Error>([] { Array().shape(); }, "empty rlx::Array");
  expect_error<Error>([] { Array::from({1.0f}, {1}).dim(1); }, "axis 1 is out of range");
}

TEST(Array, DataEvaluatesAPendingArray) {
  Array a = Array::from({1.0f, 2.0f}, {2});
  Array b = a + a;
  EXPECT_FALSE(b.is_evaluated());
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{2, 4}));
  EXPECT_TRUE(b.is_evaluated());
}

}  // namespace
}  // namespace rlx
