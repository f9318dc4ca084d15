// Creation ops: constants, ranges and counter-based random numbers.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "rlx/core/custom.h"
#include "rlx/core/error.h"
#include "rlx/core/kernel_util.h"
#include "rlx/core/op_checks.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

// An array of `shape` whose element i is value(i), converted to its dtype.
template <class ValueFn>
Array generate(std::string name, const Shape& shape, Dtype dtype, ValueFn value) {
  check_shape(name, shape);
  CustomCompute compute = dispatch_dtype(dtype, [value](auto tag) -> CustomCompute {
    using T = decltype(tag);
    return [value](std::span<const Array>, Array& out) {
      T* y = out.mutable_data<T>().data();
      const std::int64_t n = out.size();
      for (std::int64_t i = 0; i < n; ++i) y[i] = detail::convert<T>(value(i));
    };
  });
  return make_local_custom(std::move(name), shape, dtype, {}, std::move(compute));
}

// SplitMix64's output function: a bijective mix of 64 bits.
constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The counter-th number of the SplitMix64 stream of `seed`, as a double in
// [0, 1): random access, so any element is computed on its own.
double uniform01(std::uint64_t seed, std::uint64_t counter) {
  constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;
  const std::uint64_t bits = mix64(mix64(seed) + (counter + 1) * kGolden);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace

Array full(const Shape& shape, double value, Dtype dtype) {
  return generate("full", shape, dtype, [value](std::int64_t) { return value; });
}

Array zeros(const Shape& shape, Dtype dtype) { return full(shape, 0.0, dtype); }

Array ones(const Shape& shape, Dtype dtype) { return full(shape, 1.0, dtype); }

Array arange(double start, double stop, double step, Dtype dtype) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step)) {
    throw Error("arange: start, stop and step must be finite and step non-zero");
  }
  const auto count = static_cast<std::int64_t>(std::max(0.0, std::ceil((stop - start) / step)));
  return generate("arange", {count}, dtype,
                  [start, step](std::int64_t i) { return start + static_cast<double>(i) * step; });
}

Array random_uniform(const Shape& shape, double low, double high, std::uint64_t seed, Dtype dtype) {
  detail::check_floating("random_uniform", dtype);
  return generate("random_uniform", shape, dtype, [low, high, seed](std::int64_t i) {
    return low + (high - low) * uniform01(seed, static_cast<std::uint64_t>(i));
  });
}

Array random_normal(const Shape& shape, double mean, double stddev, std::uint64_t seed,
                    Dtype dtype) {
  detail::check_floating("random_normal", dtype);
  // Box-Muller: elements 2p and 2p + 1 are the cosine and sine halves of pair p.
  return generate("random_normal", shape, dtype, [mean, stddev, seed](std::int64_t i) {
    const auto pair = static_cast<std::uint64_t>(i / 2);
    const double radius = std::sqrt(-2.0 * std::log1p(-uniform01(seed, 2 * pair)));
    const double angle = 2.0 * std::numbers::pi * uniform01(seed, 2 * pair + 1);
    return mean + stddev * radius * (i % 2 == 0 ? std::cos(angle) : std::sin(angle));
  });
}

}  // namespace rlx
