// Entry point of the TCP ring transport, rlx's default.
#pragma once

#include <memory>
#include <string>

#include "rlx/transport/launch_env.h"
#include "rlx/transport/subgroup_setup.h"
#include "rlx/transport/transport.h"

namespace rlx::tcp {

// Rendezvous with every rank (through RLX_COORDINATOR or RLX_HOSTFILE) and
// connect. Throws CollectiveError on a malformed setting or a failed connect.
std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env);
// The same without a rendezvous: listens on `host` and learns every rank's
// endpoint through `exchange` (a PMIx launcher's key-value store).
std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env, const std::string& host,
                                  const EndpointExchange& exchange);

}  // namespace rlx::tcp
