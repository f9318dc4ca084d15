// The cost of the 40-byte frame header every TCP message and collective step
// carries: encoding and the validating decode, each per header.
#include <benchmark/benchmark.h>

#include "rlx/transport/frame.h"

namespace rlx::wire {
namespace {

const FrameHeader kStep = collective_header(
    {.kind = CollectiveKind::all_reduce, .dtype = Dtype::f32, .count = 1 << 20, .sequence = 7}, 3,
    512 << 10);

void BM_FrameEncode(benchmark::State& state) {
  FrameHeader header = kStep;
  for (auto _ : state) {
    header.sequence++;
    EncodedHeader bytes = encode(header);
    benchmark::DoNotOptimize(bytes);
  }
}
BENCHMARK(BM_FrameEncode);

void BM_FrameDecode(benchmark::State& state) {
  const EncodedHeader bytes = encode(kStep);
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes.data());
    FrameHeader header = decode(bytes);
    benchmark::DoNotOptimize(header);
  }
}
BENCHMARK(BM_FrameDecode);

void BM_FrameDecodeAndCheckCall(benchmark::State& state) {
  // What a receiver does per step: decode, then compare the announced call with its own.
  const EncodedHeader bytes = encode(kStep);
  const CollectiveCall mine = call_of(kStep);
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes.data());
    const bool same = call_of(decode(bytes)) == mine;
    benchmark::DoNotOptimize(same);
  }
}
BENCHMARK(BM_FrameDecodeAndCheckCall);

}  // namespace
}  // namespace rlx::wire
