// 16-bit floating-point storage types: IEEE binary16 (float16) and bfloat16.
//
// Both are storage formats: arithmetic converts to float, computes there and
// rounds back (round to nearest, ties to even), which is also how reductions
// over them accumulate. The conversions are branch-light bit manipulation so
// they work on every compiler and vectorise in simple loops.
#pragma once

#include <bit>
#include <cstdint>

namespace rlx {

namespace half_bits {

// float -> binary16, round to nearest even; NaN stays NaN, overflow gives inf.
constexpr std::uint16_t from_float(float value) {
  constexpr std::uint32_t kF16Max = (127 + 16) << 23;  // 65536.0f: first value that is inf
  constexpr std::uint32_t kF32Inf = 255u << 23;
  constexpr std::uint32_t kDenormMagic = ((127 - 15) + (23 - 10) + 1) << 23;  // 0.5f
  std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  std::uint32_t out;
  if (bits >= kF16Max) {
    out = bits > kF32Inf ? 0x7e00 : 0x7c00;
  } else if (bits < (113u << 23)) {
    // Subnormal result: adding 0.5f aligns the 10 mantissa bits at the bottom
    // and lets the FPU do the rounding.
    const float aligned = std::bit_cast<float>(bits) + std::bit_cast<float>(kDenormMagic);
    out = std::bit_cast<std::uint32_t>(aligned) - kDenormMagic;
  } else {
    const std::uint32_t mantissa_odd = (bits >> 13) & 1;
    bits += (static_cast<std::uint32_t>(15 - 127) << 23) + 0xfff + mantissa_odd;
    out = bits >> 13;
  }
  return static_cast<std::uint16_t>(out | (sign >> 16));
}

constexpr float to_float(std::uint16_t half) {
  constexpr std::uint32_t kShiftedExp = 0x7c00u << 13;
  constexpr float kMagic = std::bit_cast<float>(113u << 23);
  std::uint32_t bits = (half & 0x7fffu) << 13;
  const std::uint32_t exp = kShiftedExp & bits;
  bits += (127 - 15) << 23;
  if (exp == kShiftedExp) {
    bits += (128 - 16) << 23;  // inf or NaN
  } else if (exp == 0) {
    bits += 1 << 23;  // zero or subnormal: renormalise through the FPU
    bits = std::bit_cast<std::uint32_t>(std::bit_cast<float>(bits) - kMagic);
  }
  return std::bit_cast<float>(bits | (static_cast<std::uint32_t>(half & 0x8000u) << 16));
}

}  // namespace half_bits

namespace bfloat16_bits {

constexpr std::uint16_t from_float(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // keep NaN quiet
  }
  const std::uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

constexpr float to_float(std::uint16_t bf) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bf) << 16);
}

}  // namespace bfloat16_bits

// IEEE 754 binary16.
struct float16_t {
  std::uint16_t bits = 0;

  constexpr float16_t() = default;
  constexpr explicit float16_t(float value) : bits(half_bits::from_float(value)) {}
  static constexpr float16_t from_bits(std::uint16_t raw) {
    float16_t h;
    h.bits = raw;
    return h;
  }
  constexpr explicit operator float() const { return half_bits::to_float(bits); }
  friend constexpr bool operator==(float16_t a, float16_t b) { return a.bits == b.bits; }
};

// Brain floating point: float's exponent, 7 mantissa bits.
struct bfloat16_t {
  std::uint16_t bits = 0;

  constexpr bfloat16_t() = default;
  constexpr explicit bfloat16_t(float value) : bits(bfloat16_bits::from_float(value)) {}
  static constexpr bfloat16_t from_bits(std::uint16_t raw) {
    bfloat16_t b;
    b.bits = raw;
    return b;
  }
  constexpr explicit operator float() const { return bfloat16_bits::to_float(bits); }
  friend constexpr bool operator==(bfloat16_t a, bfloat16_t b) { return a.bits == b.bits; }
};

static_assert(sizeof(float16_t) == 2 && sizeof(bfloat16_t) == 2);

}  // namespace rlx
