// What the flight recorder (rlx/transport/call_record.h) adds to every call:
// one recorded call, begun and ended, on a ring of the default size, against
// the same loop with recording off (RLX_RECORD_CALLS=0); with the choice of
// algorithm noted, as a collective does; and with RLX_TRACE on, which reads
// the clock at both ends while the service thread writes the trace.
#include <filesystem>
#include <string>

#include <benchmark/benchmark.h>
#include <unistd.h>

#include "rlx/transport/call_record.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/transport.h"

namespace rlx {
namespace {

void record_calls(benchmark::State& state, std::size_t entries, bool note_choice = false,
                  const std::string& trace_dir = "") {
  CallRecord record(entries, "", trace_dir);
  const auto world = record.add_group("world", 0, {0, 1});
  std::uint64_t sequence = 0;
  for (auto _ : state) {
    const auto ticket = record.begin(world, {"all_reduce", 1, Dtype::f32, 0}, sequence++);
    benchmark::DoNotOptimize(ticket);
    if (note_choice) record.note_choice("recursive_doubling", "network");
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

void BM_RecordedCallWithItsChoice(benchmark::State& state) {
  record_calls(state, launch_env::kDefaultRecordedCalls, true);
}
BENCHMARK(BM_RecordedCallWithItsChoice);

// A fixed count of calls: each is a line of the trace file.
void BM_TracedCall(benchmark::State& state) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-trace-bench-" + std::to_string(::getpid()));
  record_calls(state, launch_env::kDefaultRecordedCalls, true, dir.string());
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_TracedCall)->Iterations(200'000);

}  // namespace
}  // namespace rlx
