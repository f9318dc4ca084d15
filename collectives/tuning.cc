#include "collectives/tuning.h"

#include "transport/errors.h"

namespace rlx {

Tuning tuning_for(const launch_env::LaunchEnv& env) {
  const bool shared = launch_env::ranks_share_cores(env.ranks_here());
  const char* situation = shared ? "shared" : "dedicated";
  Tuning tuning{.all_reduce = env.all_reduce_algorithm};
  if (env.cost_model_file.empty()) {
    tuning.cost = shared ? kFittedCostSharedCores : kFittedCost;
    tuning.cost_source =
        std::string("built in, ") + (shared ? "ranks share cores" : "a core per rank");
    return tuning;
  }
  const CostModelFile file = read_cost_model_file(env.cost_model_file);
  const std::optional<CostModel>& fitted = shared ? file.shared_cores : file.dedicated_cores;
  if (fitted) {
    tuning.cost = *fitted;
    tuning.cost_source = "RLX_COST_MODEL=" + env.cost_model_file + " (" + situation + ")";
  } else {
    tuning.cost = shared ? kFittedCostSharedCores : kFittedCost;
    tuning.cost_source =
        "built in: RLX_COST_MODEL=" + env.cost_model_file + " has no '" + situation + "' line";
  }
  return tuning;
}

}  // namespace rlx
