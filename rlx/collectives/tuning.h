// How the collectives choose their algorithms on this host: resolved once
// from the settings when a transport starts, so no collective reads the
// environment or a file. The choice itself is algorithm_table.h's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlx/collectives/cost_model.h"
#include "rlx/transport/collective_call.h"
#include "rlx/transport/launch_env.h"

namespace rlx {

// One rule of RLX_TUNE (or RLX_ALL_REDUCE_ALGORITHM), its names checked
// against the tables.
struct ForcedAlgorithm {
  CollectiveKind collective = CollectiveKind::all_reduce;
  std::uint64_t from_bytes = 0;
  std::uint64_t to_bytes = launch_env::kNoUpperBound;  // excluded
  std::string algorithm;                               // a row's name in its table
  std::string rule;  // as written, with its variable: "RLX_TUNE all_gather:0-256k:ring"
  // RLX_TUNE's rules are strict: a call they cover that their algorithm
  // cannot run is an error. RLX_ALL_REDUCE_ALGORITHM (older) applies where
  // its algorithm can run and leaves the rest to the default.
  bool strict = true;
};

struct Tuning {
  // RLX_TUNE's rules in the order written, then RLX_ALL_REDUCE_ALGORITHM's.
  std::vector<ForcedAlgorithm> forced;
  // Of `forced`: every rank of a group must force alike (SameHost checks).
  std::uint64_t forced_fingerprint = 0;
  CostModel cost = kFittedCost;
  // Where `cost` came from, for the debug log: "built in, a core per rank",
  // "RLX_COST_MODEL=/path (shared)".
  std::string cost_source = "built in, a core per rank";
  // The same-host path's, for the hierarchical all-reduce's choice.
  CostModel shm_cost = kFittedShmCost;
  std::string shm_cost_source = "built in, a core per rank";
};

// The tuning of a rank started with `env`: RLX_TUNE and
// RLX_ALL_REDUCE_ALGORITHM, and the cost model for ranks that have a core
// each or share cores (RLX_LOCAL_SIZE against the hardware threads), from
// RLX_COST_MODEL's file when it is set (bench/scaling --write-cost-model
// writes one), else the constants built in. Throws CollectiveError
// (invalid_argument) when a rule names a collective or an algorithm that no
// table has, or the cost-model file is unreadable or malformed.
Tuning tuning_for(const launch_env::LaunchEnv& env);

}  // namespace rlx
