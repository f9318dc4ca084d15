#include "collectives/algorithms.h"

namespace rlx {

// Crossover points between the latency-bound and the bandwidth-bound
// algorithms, from bench/rlx-bench sweeps over loopback TCP (docs/BENCHMARKS.md).
std::size_t all_reduce_ring_threshold(int world_size) {
  return world_size <= 2 ? std::size_t{256} << 10 : std::size_t{64} << 10;
}

std::size_t all_gather_ring_threshold(int world_size) {
  return world_size <= 2 ? std::size_t{1} << 30 : std::size_t{32} << 10;
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
