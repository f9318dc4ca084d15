#include "rlx/backends/verbs/verbs.h"

namespace rlx::verbs {

bool is_built() { return false; }

std::shared_ptr<Transport> create(const launch_env::LaunchEnv&) {
  throw CollectiveError(ErrorKind::backend_unavailable, {.operation = "init verbs"},
                        "this rlx was built without the RDMA verbs transport",
                        "install libibverbs-dev and librdmacm-dev, then reconfigure rlx with "
                        "-DRLX_WITH_VERBS=AUTO or ON (or, for a project that found rlx with "
                        "find_package, that project: its verbs component was not found)");
}

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env, const EndpointExchange&) {
  return create(env);
}

}  // namespace rlx::verbs
