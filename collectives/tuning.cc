#include "collectives/tuning.h"

#include "transport/errors.h"

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

}  // namespace

Tuning tuning_for(const launch_env::LaunchEnv& env) {
  const bool shared = launch_env::ranks_share_cores(env.ranks_here());
  Tuning tuning{.all_reduce = env.all_reduce_algorithm};
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
