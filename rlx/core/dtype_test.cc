#include "rlx/core/dtype.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "rlx/core/error.h"

namespace rlx {
namespace {

TEST(Dtype, SizesAndNamesRoundTrip) {
  const std::size_t sizes[] = {4, 8, 2, 2, 4, 8, 1, 1};
  int i = 0;
  for (Dtype dtype : kAllDtypes) {
    EXPECT_EQ(size_of(dtype), sizes[i++]) << name_of(dtype);
    EXPECT_EQ(dtype_from_name(name_of(dtype)), dtype);
    EXPECT_TRUE(is_valid_dtype(static_cast<std::uint8_t>(dtype)));
  }
  EXPECT_FALSE(is_valid_dtype(8));
  EXPECT_EQ(dtype_of<float>, Dtype::f32);
  EXPECT_EQ(dtype_of<const bfloat16_t>, Dtype::bf16);
}

TEST(Dtype, UnknownNameSaysWhatIsAccepted) {
  try {
    dtype_from_name("float32");
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'float32'"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("bf16"), std::string::npos);
  }
}

TEST(Float16, EveryBitPatternRoundTrips) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float wide = half_bits::to_float(static_cast<std::uint16_t>(bits));
    const std::uint16_t back = half_bits::from_float(wide);
    if (std::isnan(wide)) {
      EXPECT_EQ(back & 0x7c00, 0x7c00);
      EXPECT_NE(back & 0x3ff, 0);
    } else {
      ASSERT_EQ(back, bits) << "bits " << bits << " value " << wide;
    }
  }
}

TEST(Float16, KnownValuesAndRounding) {
  EXPECT_EQ(float16_t(1.0f).bits, 0x3c00);
  EXPECT_EQ(float16_t(-2.0f).bits, 0xc000);
  EXPECT_EQ(float16_t(65504.0f).bits, 0x7bff);  // largest finite
  EXPECT_EQ(float16_t(65520.0f).bits, 0x7c00);  // rounds up to inf
  EXPECT_EQ(float16_t(std::numeric_limits<float>::infinity()).bits, 0x7c00);
  EXPECT_EQ(float16_t(5.9604645e-08f).bits, 0x0001);             // smallest subnormal
  EXPECT_EQ(float16_t(1.0f + 0.00048828125f).bits, 0x3c00);      // tie to even (down)
  EXPECT_EQ(float16_t(1.0f + 3 * 0.00048828125f).bits, 0x3c02);  // tie to even (up)
  EXPECT_FLOAT_EQ(static_cast<float>(float16_t::from_bits(0x3555)), 0.33325195f);
}

TEST(BFloat16, RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(bfloat16_t(1.0f).bits, 0x3f80);
  EXPECT_EQ(static_cast<float>(bfloat16_t(3.0f)), 3.0f);
  EXPECT_EQ(bfloat16_t(1.00390625f).bits, 0x3f80);  // exactly half an ulp: to even
  EXPECT_EQ(bfloat16_t(1.01171875f).bits, 0x3f82);  // 1.5 ulp: to even (up)
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16_t(std::nanf("")))));
  EXPECT_EQ(bfloat16_t(-std::numeric_limits<float>::infinity()).bits, 0xff80);
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float wide = bfloat16_bits::to_float(static_cast<std::uint16_t>(bits));
    if (!std::isnan(wide)) {
      ASSERT_EQ(bfloat16_bits::from_float(wide), bits);
    }
  }
}

TEST(Dtype, DispatchReachesEveryType) {
  for (Dtype dtype : kAllDtypes) {
    EXPECT_EQ(dispatch_dtype(dtype, [](auto tag) { return dtype_of<decltype(tag)>; }), dtype);
  }
}

}  // namespace
}  // namespace rlx
