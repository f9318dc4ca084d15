// How the dispatching functions (all_reduce, all_gather) choose an algorithm
// on this host: resolved once from the settings when a transport starts, so
// no collective reads the environment or a file.
#pragma once

#include <string>

#include "collectives/cost_model.h"
#include "transport/launch_env.h"

namespace rlx {

struct Tuning {
  launch_env::AllReduceAlgorithm all_reduce = launch_env::AllReduceAlgorithm::by_size;
  CostModel cost = kFittedCost;
  // Where `cost` came from, for the debug log: "built in, a core per rank",
  // "RLX_COST_MODEL=/path (shared)".
  std::string cost_source = "built in, a core per rank";
  // The same-host path's, for the hierarchical all-reduce's choice.
  CostModel shm_cost = kFittedShmCost;
  std::string shm_cost_source = "built in, a core per rank";
};

// The tuning of a rank started with `env`: RLX_ALL_REDUCE_ALGORITHM, and the
// cost model for ranks that have a core each or share cores (RLX_LOCAL_SIZE
// against the hardware threads), from RLX_COST_MODEL's file when it is set
// (bench/scaling --write-cost-model writes one), else the constants built in.
// Throws CollectiveError (invalid_argument) when that file is unreadable or
// malformed.
Tuning tuning_for(const launch_env::LaunchEnv& env);

}  // namespace rlx
