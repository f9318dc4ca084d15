#include "collectives/cost_model.h"

#include <bit>
#include <cmath>
#include <limits>

namespace rlx {

AlgorithmWork all_reduce_ring_work(int world_size, double bytes) {
  const double n = world_size;
  return {.steps = 2 * (n - 1),
          .bytes_sent = 2 * (n - 1) / n * bytes,
          .bytes_reduced = (n - 1) / n * bytes};
}

AlgorithmWork all_reduce_recursive_doubling_work(int world_size, double bytes) {
  const auto pow2 = std::bit_floor(static_cast<unsigned>(world_size));
  const double rounds = std::countr_zero(pow2);
  const double folded = static_cast<unsigned>(world_size) > pow2 ? 1 : 0;
  return {.steps = rounds + 2 * folded,
          .bytes_sent = (rounds + 2 * folded) * bytes,
          .bytes_reduced = (rounds + folded) * bytes};
}

std::size_t all_reduce_crossover_bytes(const CostModel& cost, int world_size) {
  // Both costs are linear in the size: fixed + per_byte * bytes.
  const AlgorithmWork ring = all_reduce_ring_work(world_size, 1);
  const AlgorithmWork doubling = all_reduce_recursive_doubling_work(world_size, 1);
  const double extra_fixed = (ring.steps - doubling.steps) * cost.alpha;
  const double saved_per_byte = (doubling.bytes_sent - ring.bytes_sent) * cost.beta +
                                (doubling.bytes_reduced - ring.bytes_reduced) * cost.gamma;
  if (extra_fixed <= 0) return 0;
  if (saved_per_byte <= 0) return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(std::ceil(extra_fixed / saved_per_byte));
}

}  // namespace rlx
