#include <string>

#include "collectives/algorithms.h"
#include "transport/log.h"

namespace rlx {
namespace {

using launch_env::AllReduceAlgorithm;

const char* algorithm_name(AllReduceAlgorithm algorithm) {
  return algorithm == AllReduceAlgorithm::ring ? "ring" : "recursive doubling";
}

// The algorithm for `data`, and why.
AllReduceAlgorithm choose(const Links& links, ElementSpan data, const Tuning& tuning,
                          std::string* why) {
  // The ring splits the buffer into a block per rank: it needs an element each.
  const bool tiny = data.count < static_cast<std::size_t>(links.world_size());
  if (tuning.all_reduce == AllReduceAlgorithm::ring && tiny) {
    if (why) *why = "RLX_ALL_REDUCE_ALGORITHM=ring, but fewer elements than ranks";
    return AllReduceAlgorithm::recursive_doubling;
  }
  if (tuning.all_reduce != AllReduceAlgorithm::by_size) {
    if (why) *why = "forced by RLX_ALL_REDUCE_ALGORITHM";
    return tuning.all_reduce;
  }
  const std::size_t crossover = all_reduce_crossover_bytes(tuning.cost, links.world_size());
  const bool ring = !tiny && data.bytes() >= crossover;
  if (why) {
    *why = std::string(ring ? "at or above" : "below") + " the crossover of " +
           std::to_string(crossover) + " B at " + std::to_string(links.world_size()) +
           " ranks (cost model: " + tuning.cost_source + ")";
  }
  return ring ? AllReduceAlgorithm::ring : AllReduceAlgorithm::recursive_doubling;
}

}  // namespace

void all_reduce(Links& links, const CollectiveCall& call, ElementSpan data, const Tuning& tuning) {
  std::string why;
  const AllReduceAlgorithm algorithm =
      choose(links, data, tuning, log_enabled(LogLevel::debug) ? &why : nullptr);
  log_lazily(LogLevel::debug,
             [&] { return call.describe() + ": " + algorithm_name(algorithm) + ", " + why; });
  if (algorithm == AllReduceAlgorithm::ring) return all_reduce_ring(links, call, data);
  all_reduce_recursive_doubling(links, call, data);
}

}  // namespace rlx
