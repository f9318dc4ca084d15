// The array runtime's speed: matmul through rlx beside OpenBLAS called
// directly (the gap is rlx's overhead: it should be a few percent at most for
// 512 and up), and the fixed cost per op of building and evaluating a graph.
#include <chrono>
#include <vector>

#include <benchmark/benchmark.h>
#include <cblas.h>

#include "rlx/core/array.h"
#include "rlx/core/eval.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

void set_gflops(benchmark::State& state, std::int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      static_cast<double>(2 * n * n * n) * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}

void BM_MatmulRlx(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const Array a = random_uniform({n, n}, -1, 1, 1);
  const Array b = random_uniform({n, n}, -1, 1, 2);
  eval(a, b);
  for (auto _ : state) {
    Array c = matmul(a, b);
    eval(c);
    benchmark::DoNotOptimize(c.raw_data());
  }
  set_gflops(state, n);
}
BENCHMARK(BM_MatmulRlx)->Arg(128)->Arg(512)->Arg(1024)->UseRealTime();

void BM_MatmulOpenBlas(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const Array a = random_uniform({n, n}, -1, 1, 1);
  const Array b = random_uniform({n, n}, -1, 1, 2);
  std::vector<float> c(static_cast<std::size_t>(n * n));
  const auto bn = static_cast<blasint>(n);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bn, bn, bn, 1.0f, a.data<float>().data(),
                bn, b.data<float>().data(), bn, 0.0f, c.data(), bn);
    benchmark::DoNotOptimize(c.data());
  }
  set_gflops(state, n);
}
BENCHMARK(BM_MatmulOpenBlas)->Arg(128)->Arg(512)->Arg(1024)->UseRealTime();

// A chain of 1,000 elementwise ops (add, mul, sub, tanh in turn) over arrays
// of range(0) elements, built and evaluated each iteration. Counters give
// the time per node: in all, building only and evaluating only.
void BM_ElementwiseGraph(benchmark::State& state) {
  constexpr int kNodes = 1000;
  const std::int64_t size = state.range(0);
  const Array x = random_uniform({size}, -1, 1, 3);
  const Array b = random_uniform({size}, -1, 1, 4);
  eval(x, b);
  using Clock = std::chrono::steady_clock;
  Clock::duration building{};
  Clock::duration evaluating{};
  for (auto _ : state) {
    const auto start = Clock::now();
    Array y = x;
    for (int i = 0; i < kNodes; ++i) {
      switch (i % 4) {
        case 0:
          y = y + b;
          break;
        case 1:
          y = y * b;
          break;
        case 2:
          y = y - b;
          break;
        default:
          y = tanh(y);
      }
    }
    const auto built = Clock::now();
    eval(y);
    benchmark::DoNotOptimize(y.raw_data());
    evaluating += Clock::now() - built;
    building += built - start;
  }
  const double nodes = static_cast<double>(state.iterations()) * kNodes;
  auto per_node = [nodes](Clock::duration total) {
    return static_cast<double>(
               std::chrono::duration_cast<std::chrono::nanoseconds>(total).count()) /
           nodes;
  };
  state.counters["ns_per_node"] = per_node(building + evaluating);
  state.counters["build_ns_per_node"] = per_node(building);
  state.counters["eval_ns_per_node"] = per_node(evaluating);
}
BENCHMARK(BM_ElementwiseGraph)->Arg(16)->Arg(4096);

}  // namespace
}  // namespace rlx
