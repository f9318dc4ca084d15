// Entry points of the RDMA verbs transport. rlx/backends/verbs/no_verbs.cc
// implements them when rlx is built without verbs (RLX_WITH_VERBS=OFF, or AUTO
// without libibverbs and librdmacm).
#pragma once

#include <memory>

#include "rlx/transport/launch_env.h"
#include "rlx/transport/subgroup_setup.h"
#include "rlx/transport/transport.h"

namespace rlx::verbs {

// True when this build contains the verbs transport.
bool is_built();

// Connects to every rank over RDMA. Throws CollectiveError
// (backend_unavailable) when the transport is not built or no device works.
std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env);
// The same without a rendezvous: on RLX_HOST_ADDRESS / RLX_IFNAME's address,
// else the first active RDMA port's, learning every rank's endpoint through
// `exchange` (a PMIx launcher's key-value store).
std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env,
                                  const EndpointExchange& exchange);

}  // namespace rlx::verbs
