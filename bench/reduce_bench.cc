// Reduction kernel throughput per dtype and op, beside memcpy of the same
// bytes (the bandwidth ceiling). Bytes counted: both operands read, one written.
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "rlx/collectives/reduce.h"

namespace rlx {
namespace {

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes * 2));
}
BENCHMARK(BM_Memcpy)->Arg(1 << 16)->Arg(1 << 22);

void BM_Reduce(benchmark::State& state, Dtype dtype, ReduceOp op) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t count = bytes / size_of(dtype);
  std::vector<std::byte> acc(bytes, std::byte{0}), in(bytes, std::byte{0});
  for (auto _ : state) {
    reduce_into({acc.data(), count, dtype}, {in.data(), count, dtype}, op);
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes * 3));
}

#define RLX_REDUCE_BENCH(dtype, op) \
  BENCHMARK_CAPTURE(BM_Reduce, dtype##_##op, Dtype::dtype, ReduceOp::op)->Arg(1 << 16)->Arg(1 << 22)
RLX_REDUCE_BENCH(f32, sum);
RLX_REDUCE_BENCH(f32, max);
RLX_REDUCE_BENCH(f64, sum);
RLX_REDUCE_BENCH(f16, sum);
RLX_REDUCE_BENCH(bf16, sum);
RLX_REDUCE_BENCH(i32, sum);
RLX_REDUCE_BENCH(i64, prod);
RLX_REDUCE_BENCH(u8, min);
RLX_REDUCE_BENCH(boolean, sum);

}  // namespace
}  // namespace rlx
