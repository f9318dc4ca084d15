// Plain reference loops and test data shared by the core tests: every op is
// checked against the obvious, slow computation written here.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "rlx/core/array.h"
#include "rlx/core/shape.h"

namespace rlx::testing {

// Deterministic values of T spread over [-range, range] (or [0, range] unsigned).
template <class T>
std::vector<T> sample(std::int64_t count, std::uint32_t seed, double range = 4.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(std::is_unsigned_v<T> ? 0.0 : -range, range);
  std::vector<T> out;
  for (std::int64_t i = 0; i < count; ++i) {
    if constexpr (std::is_integral_v<T>) {
      out.push_back(static_cast<T>(std::lround(dist(gen))));
    } else {
      out.push_back(static_cast<T>(static_cast<float>(dist(gen))));
    }
  }
  return out;
}

template <class T>
Array array_of(const Shape& shape, std::uint32_t seed, double range = 4.0) {
  return Array::from(sample<T>(numel(shape), seed, range), shape);
}

// The multi-index of row-major position `flat` in `shape`.
inline std::vector<std::int64_t> unravel(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> index(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// Row-major position in `shape` of the output multi-index `index` (of a
// possibly longer, broadcast shape): NumPy's broadcasting read.
inline std::int64_t broadcast_position(const std::vector<std::int64_t>& index, const Shape& shape) {
  std::int64_t flat = 0;
  const std::size_t lead = index.size() - shape.size();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    flat = flat * shape[d] + (shape[d] == 1 ? 0 : index[lead + d]);
  }
  return flat;
}

inline double to_double(float16_t x) { return static_cast<double>(static_cast<float>(x)); }
inline double to_double(bfloat16_t x) { return static_cast<double>(static_cast<float>(x)); }
template <class T>
double to_double(T x) {
  return static_cast<double>(x);
}

// Expects equal sizes and each element within `tolerance` (relative to
// max(1, |expected|)).
template <class T>
void expect_close(std::span<const T> actual, const std::vector<double>& expected, double tolerance,
                  const std::string& what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double a = to_double(actual[i]);
    const double e = expected[i];
    if (std::isnan(e)) {
      EXPECT_TRUE(std::isnan(a)) << what << " at " << i;
    } else {
      EXPECT_LE(std::abs(a - e), tolerance * std::max(1.0, std::abs(e)))
          << what << " at " << i << ": got " << a << ", expected " << e;
    }
  }
}

// Runs `fn` and expects it to throw E whose message contains `part`.
template <class E, class Fn>
void expect_error(Fn&& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << part << "\"";
  } catch (const E& error) {
    EXPECT_NE(std::string(error.what()).find(part), std::string::npos)
        << "message: " << error.what() << "\nexpected to contain: " << part;
  }
}

}  // namespace rlx::testing
