// What the flight recorder (rlx/transport/call_record.h) adds to every call:
// one recorded call, begun and ended, on a ring of the default size, against
// the same loop with recording off (RLX_RECORD_CALLS=0).
#include <benchmark/benchmark.h>

#include "rlx/transport/call_record.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/transport.h"

namespace rlx {
namespace {

void record_calls(benchmark::State& state, std::size_t entries) {
  CallRecord record(entries, "");
  const auto world = record.add_group("world", 0, {0, 1});
  std::uint64_t sequence = 0;
  for (auto _ : state) {
    const auto ticket = record.begin(world, {"all_reduce", 1, Dtype::f32, 0}, sequence++);
    benchmark::DoNotOptimize(ticket);
    record.end(ticket);
  }
}

// The ring's size: the default, and one that stays in L1.
void BM_RecordedCall(benchmark::State& state) {
  record_calls(state, static_cast<std::size_t>(state.range(0)));
}
BENCHMARK(BM_RecordedCall)->Arg(launch_env::kDefaultRecordedCalls)->Arg(64);

void BM_RecordingOff(benchmark::State& state) { record_calls(state, 0); }
BENCHMARK(BM_RecordingOff);

}  // namespace
}  // namespace rlx
