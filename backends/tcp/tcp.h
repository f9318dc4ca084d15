// Entry point of the TCP ring transport, rlx's default.
#pragma once

#include <memory>

#include "transport/launch_env.h"
#include "transport/transport.h"

namespace rlx::tcp {

// Rendezvous with every rank (through RLX_COORDINATOR or RLX_HOSTFILE) and
// connect. Throws CollectiveError on a malformed setting or a failed connect.
std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env);

}  // namespace rlx::tcp
