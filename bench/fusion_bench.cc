// fusion-bench: many small in-graph all-reduces in one eval, bucketed into
// one collective (core's batching) against one collective each. Runs under
// rlxrun (or mpirun):
//
//   rlxrun -n 2 build/release/bench/fusion-bench [--arrays 100] [--elements 1024] [--reps 21]
//
// Prints the median time per eval of `arrays` all_sums (the slowest rank's),
// fused and unfused, and the speed-up.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rlx/rlx.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds for one eval of every array's all_sum, the slowest rank's.
double time_one_eval(rlx::Transport& group, const std::vector<rlx::Array>& grads) {
  std::vector<rlx::Array> reduced;
  reduced.reserve(grads.size());
  for (const rlx::Array& g : grads) reduced.push_back(rlx::distributed::all_sum(g));
  group.barrier();
  const auto start = Clock::now();
  rlx::eval(std::span<const rlx::Array>(reduced));
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  group.all_reduce(std::span(&seconds, 1), rlx::ReduceOp::max);
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  int arrays = 100, reps = 21;
  std::int64_t elements = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--arrays") == 0)
      arrays = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--elements") == 0)
      elements = std::atol(argv[i + 1]);
    else if (std::strcmp(argv[i], "--reps") == 0)
      reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--arrays N] [--elements E] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  auto group = rlx::init();
  std::vector<rlx::Array> grads;
  for (int i = 0; i < arrays; ++i) {
    grads.push_back(rlx::full({elements}, group->rank() + i));
  }
  rlx::eval(std::span<const rlx::Array>(grads));
  const std::size_t default_cap = rlx::batch_bytes_cap();
  std::vector<double> fused, unfused;
  for (int rep = 0; rep < reps + 1; ++rep) {  // the first repetition warms up
    rlx::set_batch_bytes_cap(default_cap);
    const double f = time_one_eval(*group, grads);
    rlx::set_batch_bytes_cap(0);
    const double u = time_one_eval(*group, grads);
    if (rep == 0) continue;
    fused.push_back(f);
    unfused.push_back(u);
  }
  if (group->rank() == 0) {
    const double f = median(fused), u = median(unfused);
    std::printf("# fusion-bench: %d ranks, %d all_sums of %lld x f32 (%.1f KiB) in one eval\n",
                group->world_size(), arrays, static_cast<long long>(elements),
                elements * 4.0 / 1024);
    std::printf("unfused %.1f us | fused %.1f us | speed-up %.1fx\n", u * 1e6, f * 1e6, u / f);
  }
  return 0;
}
