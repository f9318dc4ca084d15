#include "rlx/collectives/tuning.h"

#include "rlx/collectives/algorithm_table.h"
#include "rlx/transport/errors.h"

namespace rlx {

namespace {

// The constants of `line` from the file when it has them, else built in;
// and where they came from, for the debug log.
void choose(const std::optional<CostModel>& fitted, CostModel built_in, const std::string& file,
            const std::string& line, bool shared, CostModel& cost, std::string& source) {
  if (file.empty()) {
    cost = built_in;
    source = std::string("built in, ") + (shared ? "ranks share cores" : "a core per rank");
  } else if (fitted) {
    cost = *fitted;
    source = "RLX_COST_MODEL=" + file + " (" + line + ")";
  } else {
    cost = built_in;
    source = "built in: RLX_COST_MODEL=" + file + " has no '" + line + "' line";
  }
}

[[noreturn]] void fail(const std::string& rule, const std::string& problem, std::string hint) {
  throw CollectiveError(ErrorKind::invalid_argument, {.operation = "read launch environment"},
                        rule + ": " + problem, std::move(hint));
}

std::string names_of_collectives() {
  std::string names;
  for (const CollectiveTable& table : all_tables()) {
    names += (names.empty() ? "" : ", ") + std::string(name_of(table.collective));
  }
  return names;
}

std::string names_of_algorithms(const CollectiveTable& table) {
  std::string names;
  for (const Algorithm& algorithm : table.algorithms) {
    names += (names.empty() ? "" : ", ") + std::string(algorithm.name);
  }
  return names;
}

ForcedAlgorithm checked(const launch_env::TuneRule& rule) {
  const std::string written = "RLX_TUNE " + rule.text;
  for (const CollectiveTable& table : all_tables()) {
    if (name_of(table.collective) != rule.collective) continue;
    if (!find_algorithm(table.collective, rule.algorithm)) {
      fail(written, rule.collective + " has no algorithm '" + rule.algorithm + "'",
           "its algorithms are " + names_of_algorithms(table));
    }
    return {table.collective, rule.from_bytes, rule.to_bytes, rule.algorithm, written, true};
  }
  fail(written, "'" + rule.collective + "' is not a collective",
       "the collectives are " + names_of_collectives());
}

// FNV-1a: the same on every host, unlike std::hash.
std::uint64_t fingerprint_of(const std::vector<ForcedAlgorithm>& forced) {
  if (forced.empty()) return 0;
  std::uint64_t hash = 14695981039346656037ull;
  auto mix = [&](std::uint64_t value) {
    for (int byte = 0; byte < 8; ++byte, value >>= 8) {
      hash = (hash ^ (value & 0xff)) * 1099511628211ull;
    }
  };
  // What the rules mean, not how they are written: 256k and 262144 agree.
  for (const ForcedAlgorithm& rule : forced) {
    mix(static_cast<std::uint64_t>(rule.collective));
    mix(rule.from_bytes);
    mix(rule.to_bytes);
    mix(rule.strict ? 1 : 0);
    for (const char c : rule.algorithm) mix(static_cast<unsigned char>(c));
    mix(0);
  }
  return hash;
}

}  // namespace

Tuning tuning_for(const launch_env::LaunchEnv& env) {
  const bool shared = launch_env::ranks_share_cores(env.ranks_here());
  Tuning tuning;
  for (const launch_env::TuneRule& rule : env.tune) tuning.forced.push_back(checked(rule));
  if (env.all_reduce_algorithm != launch_env::AllReduceAlgorithm::by_size) {
    const bool ring = env.all_reduce_algorithm == launch_env::AllReduceAlgorithm::ring;
    const std::string name = ring ? "ring" : "recursive_doubling";
    tuning.forced.push_back({CollectiveKind::all_reduce, 0, launch_env::kNoUpperBound, name,
                             "RLX_ALL_REDUCE_ALGORITHM=" + name, false});
  }
  tuning.forced_fingerprint = fingerprint_of(tuning.forced);
  const CostModelFile file = env.cost_model_file.empty()
                                 ? CostModelFile{}
                                 : read_cost_model_file(env.cost_model_file, env.connect_timeout);
  choose(shared ? file.shared_cores : file.dedicated_cores,
         shared ? kFittedCostSharedCores : kFittedCost, env.cost_model_file,
         shared ? "shared" : "dedicated", shared, tuning.cost, tuning.cost_source);
  choose(shared ? file.shm_shared_cores : file.shm_dedicated_cores,
         shared ? kFittedShmCostSharedCores : kFittedShmCost, env.cost_model_file,
         shared ? "shm-shared" : "shm-dedicated", shared, tuning.shm_cost, tuning.shm_cost_source);
  return tuning;
}

}  // namespace rlx
