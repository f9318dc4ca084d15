// A rank's side of the rendezvous.
#pragma once

#include <string_view>
#include <vector>

#include "rlx/transport/endpoint.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/socket_io.h"

namespace rlx::rendezvous {

struct CoordinatorConnection {
  UniqueFd fd;
  HostPort address;
};

// Connects to env.coordinator (RLX_COORDINATOR), retrying until `deadline`:
// the first step of every network backend's setup. Throws CollectiveError:
// invalid_argument when RLX_COORDINATOR is unset or malformed (`how_to_start`
// says how to start the program instead), timeout when nobody answers.
CoordinatorConnection connect_to_coordinator(const launch_env::LaunchEnv& env, Deadline deadline,
                                             std::string_view how_to_start);

// Registers `self` as the endpoint of `rank` over `coordinator` (a connected
// socket) and waits, until `deadline`, for every rank's endpoint. Throws
// CollectiveError: timeout (naming the coordinator), protocol_violation.
std::vector<HostPort> exchange_endpoints(int coordinator, const HostPort& coordinator_address,
                                         std::string_view token, int rank, int world_size,
                                         const HostPort& self, Deadline deadline);

}  // namespace rlx::rendezvous
