// A rank's side of the rendezvous.
#pragma once

#include <string_view>
#include <vector>

#include "transport/endpoint.h"
#include "transport/socket_io.h"

namespace rlx::rendezvous {

// Registers `self` as the endpoint of `rank` over `coordinator` (a connected
// socket) and waits, until `deadline`, for every rank's endpoint. Throws
// CollectiveError: timeout (naming the coordinator), protocol_violation.
std::vector<HostPort> exchange_endpoints(int coordinator, const HostPort& coordinator_address,
                                         std::string_view token, int rank, int world_size,
                                         const HostPort& self, Deadline deadline);

}  // namespace rlx::rendezvous
