// Checks that more than one suite runs against a live group: the parameters
// of the every-dtype-and-op suites, each rank's contribution, and an
// all_gather checked element by element. Every rank computes the reference
// itself, so any rank's failure fails the job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "rlx/transport/transport.h"
#include "tests/support/reduce_reference.h"

namespace rlx::testing {

// Every dtype with every op: the parameters of the reduction suites...
inline auto every_dtype_and_op() {
  return ::testing::Combine(
      ::testing::ValuesIn(kAllDtypes),
      ::testing::Values(ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max));
}

// ...named like "f32_sum".
inline std::string dtype_and_op_name(
    const ::testing::TestParamInfo<std::tuple<Dtype, ReduceOp>>& info) {
  return std::string(name_of(std::get<0>(info.param))) + "_" +
         std::string(name_of(std::get<1>(info.param)));
}

// Rank r's contribution at element i: small integers, exact in every dtype,
// distinct across ranks and positions.
inline std::int64_t contribution(int rank, std::size_t i) {
  return static_cast<std::int64_t>((i * 7 + static_cast<std::size_t>(rank) * 5 + 3) % 5) - 2;
}

// Gathers `count` elements per rank over `group`, from a separate input or
// in place (each rank's input already in its block of the output), and
// returns how many elements of the output are wrong.
template <class T>
std::size_t wrong_after_all_gather(Transport& group, std::size_t count, bool in_place) {
  const auto n = static_cast<std::size_t>(group.world_size());
  const auto me = static_cast<std::size_t>(group.rank());
  std::unique_ptr<T[]> input(new T[count + 1]), output(new T[count * n + 1]);
  T* mine = in_place ? output.get() + me * count : input.get();
  for (std::size_t i = 0; i < count; ++i) {
    mine[i] = small_integer_as<T>(contribution(group.rank(), i));
  }
  group.all_gather(ConstElementSpan{mine, count, dtype_of<T>},
                   ElementSpan{output.get(), count * n, dtype_of<T>});
  std::size_t wrong = 0;
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count; ++i) {
      wrong +=
          !(output[r * count + i] == small_integer_as<T>(contribution(static_cast<int>(r), i)));
    }
  }
  return wrong;
}

}  // namespace rlx::testing
