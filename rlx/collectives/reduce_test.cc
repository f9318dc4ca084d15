#include "rlx/collectives/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>

#include <gtest/gtest.h>

#include "tests/support/collective_checks.h"
#include "tests/support/reduce_reference.h"

namespace rlx {
namespace {

template <class T>
T random_value(std::mt19937& rng) {
  if constexpr (std::is_same_v<T, bool>) {
    return rng() % 2 == 0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(rng());
  } else {
    std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
    return T(dist(rng));
  }
}

class ReduceTest : public ::testing::TestWithParam<std::tuple<Dtype, ReduceOp>> {};

TEST_P(ReduceTest, MatchesReferenceForOddLengths) {
  const auto [dtype, op] = GetParam();
  dispatch_dtype(dtype, [&, op = op](auto tag) {
    using T = decltype(tag);
    std::mt19937 rng(42);
    for (std::size_t n : {0u, 1u, 7u, 255u, 256u, 257u, 1031u}) {
      // Plain arrays rather than std::vector, which packs bool into bits.
      std::unique_ptr<T[]> acc(new T[n + 1]), in(new T[n + 1]), want(new T[n + 1]);
      for (std::size_t i = 0; i < n; ++i) {
        acc[i] = random_value<T>(rng);
        in[i] = random_value<T>(rng);
        want[i] = testing::reference_combine(acc[i], in[i], op);
      }
      reduce_into({acc.get(), n, dtype}, {in.get(), n, dtype}, op);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_TRUE(acc[i] == want[i]) << "n=" << n << " i=" << i;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(EveryDtypeAndOp, ReduceTest, testing::every_dtype_and_op(),
                         testing::dtype_and_op_name);

// reduce_to into either operand, or a third buffer: the same op(a, b).
TEST_P(ReduceTest, ReduceToMayWriteIntoEitherOperand) {
  const auto [dtype, op] = GetParam();
  dispatch_dtype(dtype, [&, op = op](auto tag) {
    using T = decltype(tag);
    std::mt19937 rng(7);
    constexpr std::size_t n = 257;
    std::unique_ptr<T[]> a(new T[n]), b(new T[n]), want(new T[n]);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = random_value<T>(rng);
      b[i] = random_value<T>(rng);
      want[i] = testing::reference_combine(a[i], b[i], op);
    }
    for (int into : {0, 1, 2}) {
      std::unique_ptr<T[]> x(new T[n]), y(new T[n]), z(new T[n]);
      std::copy(a.get(), a.get() + n, x.get());
      std::copy(b.get(), b.get() + n, y.get());
      T* out = into == 0 ? x.get() : into == 1 ? y.get() : z.get();
      reduce_to({out, n, dtype}, {x.get(), n, dtype}, {y.get(), n, dtype}, op);
      for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(out[i] == want[i]) << into << " " << i;
    }
  });
}

// min and max keep the operands' order: with a NaN, which one is first decides.
TEST(Reduce, ReduceToIntoTheSecondOperandKeepsTheOrderOfANan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a{nan, 1.0f}, b{1.0f, nan};
  std::vector<float> apart(2);
  reduce_to(ElementSpan::of(std::span(apart)), ConstElementSpan::of(std::span<const float>(a)),
            ConstElementSpan::of(std::span<const float>(b)), ReduceOp::min);
  reduce_to(ElementSpan::of(std::span(b)), ConstElementSpan::of(std::span<const float>(a)),
            ConstElementSpan::of(std::span<const float>(b)), ReduceOp::min);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(std::isnan(b[i]), std::isnan(apart[i])) << i;
    if (!std::isnan(apart[i])) {
      EXPECT_EQ(b[i], apart[i]) << i;
    }
  }
}

TEST(Reduce, IntegerOverflowWraps) {
  std::vector<std::int32_t> acc{std::numeric_limits<std::int32_t>::max()}, in{1};
  reduce_into(ElementSpan::of(std::span(acc)), ConstElementSpan::of(std::span<const int>(in)),
              ReduceOp::sum);
  EXPECT_EQ(acc[0], std::numeric_limits<std::int32_t>::min());
}

TEST(Reduce, MismatchedOperandsAreRejected) {
  std::vector<float> a(3), b(4);
  EXPECT_THROW(reduce_into(ElementSpan::of(std::span(a)),
                           ConstElementSpan::of(std::span<const float>(b)), ReduceOp::sum),
               CollectiveError);
}

}  // namespace
}  // namespace rlx
