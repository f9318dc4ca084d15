// What rlx's MPI path costs over calling MPI directly: all_sum through
// rlx::Transport against MPI_Allreduce (in place, same buffer, same process
// run), from 4 B to 16 MiB of floats. For reference it also times what the
// transport would cost if it polled MPI_Iallreduce to keep a throwable
// deadline, which is why it does not (see rlx/backends/mpi/mpi_transport.h).
//
//   mpirun -np N mpi_overhead_bench [--runs R] [--iterations-scale S]
//
// Each run times a tight loop of each variant back to back (in rotating
// order, so drift on a busy machine hits all of them); a run's time is the
// slowest rank's. Rank 0 prints per-call medians over the runs and the median
// of the per-run ratios to the direct call. At 4 B it also alternates the
// two calls one by one and compares the medians of the single-call times,
// which a busy machine disturbs much less.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <mpi.h>

#include "rlx/backends/mpi/backoff.h"
#include "rlx/rlx.h"

namespace {

struct Settings {
  int runs = 9;
  double iterations_scale = 1.0;
};

Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--runs") settings.runs = std::max(1, std::atoi(argv[i + 1]));
    if (flag == "--iterations-scale") settings.iterations_scale = std::atof(argv[i + 1]);
  }
  return settings;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// Seconds per call of `call` over `iterations` calls, the slowest rank's.
double time_per_call(int iterations, const std::function<void()>& call) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) call();
  double elapsed = (MPI_Wtime() - start) / iterations;
  MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return elapsed;
}

void iallreduce_polled(float* data, int count) {
  MPI_Request request;
  MPI_Iallreduce(MPI_IN_PLACE, data, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
  rlx::mpi::Backoff backoff;
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    backoff.pause();
  }
}

void bench_size(rlx::Transport& group, const Settings& settings, std::size_t bytes,
                int base_iterations, const char* label) {
  const int iterations = std::max(1, static_cast<int>(base_iterations * settings.iterations_scale));
  std::vector<float> data(bytes / sizeof(float), 0.0f);
  const int count = static_cast<int>(data.size());
  // Zeros: repeated in-place sums stay finite (and normal) however long the loop.
  const std::vector<std::function<void()>> variants = {
      [&] { MPI_Allreduce(MPI_IN_PLACE, data.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
      [&] { group.all_sum(std::span(data)); },
      [&] { iallreduce_polled(data.data(), count); },
  };
  std::vector<std::vector<double>> seconds(variants.size());
  for (std::size_t v = 0; v < variants.size(); ++v) time_per_call(iterations, variants[v]);
  for (int run = 0; run < settings.runs; ++run) {
    for (std::size_t k = 0; k < variants.size(); ++k) {
      const std::size_t v = (k + static_cast<std::size_t>(run)) % variants.size();
      seconds[v].push_back(time_per_call(iterations, variants[v]));
    }
  }
  if (group.rank() != 0) return;
  auto ratio = [&](std::size_t v) {
    std::vector<double> ratios;
    for (int run = 0; run < settings.runs; ++run) {
      ratios.push_back(seconds[v][static_cast<std::size_t>(run)] /
                       seconds[0][static_cast<std::size_t>(run)]);
    }
    return (median(ratios) - 1) * 100;
  };
  std::printf(
      "%d ranks, %-6s x %6d calls, %d runs: MPI_Allreduce %10.2f us | rlx all_sum %10.2f us "
      "(%+.1f%%) | MPI_Iallreduce+poll %10.2f us (%+.1f%%)\n",
      group.world_size(), label, iterations, settings.runs, median(seconds[0]) * 1e6,
      median(seconds[1]) * 1e6, ratio(1), median(seconds[2]) * 1e6, ratio(2));
  std::fflush(stdout);
}

// A finer view for small messages on a busy machine: the direct and the rlx
// call alternate (swapping which goes first), each timed alone, so a
// preempted stretch hits both; the medians of the per-call times compare.
void bench_paired(rlx::Transport& group, const Settings& settings, int base_iterations) {
  const int iterations = std::max(1, static_cast<int>(base_iterations * settings.iterations_scale));
  float value = 0.0f;
  const std::function<void()> variants[2] = {
      [&] { MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
      [&] { group.all_sum(std::span(&value, 1)); },
  };
  std::vector<double> seconds[2];
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < iterations * settings.runs; ++i) {
    for (int k = 0; k < 2; ++k) {
      const int v = (i + k) % 2;
      const double start = MPI_Wtime();
      variants[v]();
      seconds[v].push_back(MPI_Wtime() - start);
    }
  }
  if (group.rank() != 0) return;
  const double direct = median(seconds[0]);
  const double through_rlx = median(seconds[1]);
  std::printf(
      "%d ranks, 4 B    x %6d calls, paired: MPI_Allreduce %10.3f us | rlx all_sum %10.3f us "
      "(%+.1f%%), per-call medians\n",
      group.world_size(), iterations * settings.runs, direct * 1e6, through_rlx * 1e6,
      (through_rlx / direct - 1) * 100);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Settings settings = parse(argc, argv);
    auto group = rlx::init("mpi");
    bench_size(*group, settings, 4, 20000, "4 B");
    bench_paired(*group, settings, 20000);
    // Above 4 B the call check is an MPI call of its own (rlx/backends/mpi/call_agreement.h).
    bench_size(*group, settings, 64, 20000, "64 B");
    bench_size(*group, settings, 4096, 10000, "4 KiB");
    bench_size(*group, settings, 64 << 10, 2000, "64 KiB");
    bench_size(*group, settings, 1 << 20, 200, "1 MiB");
    bench_size(*group, settings, std::size_t{16} << 20, 40, "16 MiB");
    return 0;
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "mpi_overhead_bench: %s\n", error.what());
    return 1;
  }
}
