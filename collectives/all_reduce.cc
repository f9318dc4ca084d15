#include "collectives/algorithms.h"

namespace rlx {

// Crossover points between the latency-bound and the bandwidth-bound
// algorithms, from bench/rlx-bench sweeps over loopback TCP on the 2-core
// development machine (docs/BENCHMARKS.md, "Algorithm crossovers"). With 3-4
// ranks sharing 2 cores, each of the ring's 2(n-1) steps waits for every rank
// to be scheduled: at 4 ranks recursive doubling took 185 us at 64 KiB where
// the ring took 1.1 ms, and the ring won only from 1 MiB (1.8 vs 2.5 ms).
std::size_t all_reduce_ring_threshold(int world_size) {
  return world_size <= 2 ? std::size_t{256} << 10 : std::size_t{512} << 10;
}

// Per rank's contribution. At 4 ranks the direct exchange took 200 us for
// 64 KiB each where the ring took 390 us; the ring won from 1 MiB each.
std::size_t all_gather_ring_threshold(int world_size) {
  return world_size <= 2 ? std::size_t{1} << 30 : std::size_t{512} << 10;
}

void all_reduce(Links& links, const CollectiveCall& call, ElementSpan data) {
  const bool tiny = data.count < static_cast<std::size_t>(links.world_size());
  if (tiny || data.bytes() < all_reduce_ring_threshold(links.world_size())) {
    all_reduce_recursive_doubling(links, call, data);
  } else {
    all_reduce_ring(links, call, data);
  }
}

}  // namespace rlx
