#include "rlx/backends/verbs/verbs.h"

namespace rlx::verbs {

bool is_built() { return false; }

std::shared_ptr<Transport> create(const launch_env::LaunchEnv&) {
  throw CollectiveError(ErrorKind::backend_unavailable, {.operation = "init verbs"},
                        "this rlx was built without the RDMA verbs transport",
                        "install libibverbs-dev and librdmacm-dev, then reconfigure with "
                        "-DRLX_WITH_VERBS=AUTO or ON");
}

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env, const EndpointExchange&) {
  return create(env);
}

}  // namespace rlx::verbs
