#include <cstdlib>
#include <string>
#include <string_view>

#include "collectives/algorithms.h"
#include "collectives/cost_model.h"
#include "transport/errors.h"
#include "transport/launch_env.h"

namespace rlx {
namespace {

enum class AllReduceChoice { by_size, ring, recursive_doubling };

// RLX_ALL_REDUCE_ALGORITHM=ring|recursive_doubling forces one algorithm
// (what bench/scaling measures the model with); unset or "auto": by size.
AllReduceChoice forced_all_reduce(const Links& links) {
  static const char* const setting = std::getenv("RLX_ALL_REDUCE_ALGORITHM");
  if (setting == nullptr) return AllReduceChoice::by_size;
  const std::string_view name = setting;
  if (name == "ring") return AllReduceChoice::ring;
  if (name == "recursive_doubling") return AllReduceChoice::recursive_doubling;
  if (name.empty() || name == "auto") return AllReduceChoice::by_size;
  throw CollectiveError(
      ErrorKind::invalid_argument,
      {.rank = links.rank(), .world_size = links.world_size(), .operation = "all_reduce"},
      "RLX_ALL_REDUCE_ALGORITHM is '" + std::string(name) + "'",
      "use ring, recursive_doubling or auto");
}

// The fitted constants that match this host: more ranks here than cores
// (RLX_LOCAL_SIZE, set by rlxrun) means ranks share cores.
const CostModel& cost_here() {
  static const CostModel& cost = [&]() -> const CostModel& {
    const char* local = std::getenv(launch_env::kLocalSize);
    const int ranks_here = local != nullptr ? std::atoi(local) : 1;
    return launch_env::ranks_share_cores(ranks_here) ? kFittedCostSharedCores : kFittedCost;
  }();
  return cost;
}

}  // namespace

// The crossover the cost model predicts (docs/SCALING.md).
std::size_t all_reduce_ring_threshold(int world_size) {
  return all_reduce_crossover_bytes(cost_here(), world_size);
}

// Per rank's contribution. At 4 ranks the direct exchange took 200 us for
// 64 KiB each where the ring took 390 us; the ring won from 1 MiB each.
std::size_t all_gather_ring_threshold(int world_size) {
  return world_size <= 2 ? std::size_t{1} << 30 : std::size_t{512} << 10;
}

void all_reduce(Links& links, const CollectiveCall& call, ElementSpan data) {
  const bool tiny = data.count < static_cast<std::size_t>(links.world_size());
  switch (forced_all_reduce(links)) {
    case AllReduceChoice::ring:
      if (!tiny) return all_reduce_ring(links, call, data);
      break;  // the ring needs an element per rank
    case AllReduceChoice::recursive_doubling:
      return all_reduce_recursive_doubling(links, call, data);
    case AllReduceChoice::by_size:
      if (!tiny && data.bytes() >= all_reduce_ring_threshold(links.world_size())) {
        return all_reduce_ring(links, call, data);
      }
      break;
  }
  all_reduce_recursive_doubling(links, call, data);
}

}  // namespace rlx
