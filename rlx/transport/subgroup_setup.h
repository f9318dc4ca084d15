// What TCP and verbs share to set up a group that split() made: the new
// group's settings, and its ranks' endpoints exchanged over the parent group
// (instead of rlxrun's rendezvous).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rlx/transport/endpoint.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/transport.h"

namespace rlx {

// How a starting transport learns every rank's endpoint from its own.
using EndpointExchange = std::function<std::vector<HostPort>(const HostPort& mine)>;

// The parent's settings for the new group: its rank and size, and a job
// token of its own (an HMAC of the parent's, the split's number and the
// color), so its connections and shared memory are the new group's alone.
launch_env::LaunchEnv subgroup_env(const launch_env::LaunchEnv& parent, const SplitPlan& plan);

// Gathers `mine` over `parent` (every rank of the parent calls it, members
// of the new group or not) and returns the new group's endpoints in its
// rank order. Throws invalid_argument for a host name over 255 bytes.
std::vector<HostPort> exchange_over(Transport& parent, const SplitPlan& plan, const HostPort& mine);

// split() for a backend whose groups are new transports of its own kind
// (TCP, verbs): `Backend(env, listen_at, exchange)` starts the new group
// with its endpoints exchanged over `parent`. A rank the split leaves out
// (plan.rank < 0) still takes part in the exchange, and gets no group.
template <class Backend>
std::shared_ptr<Transport> split_as(Transport& parent, const launch_env::LaunchEnv& parent_env,
                                    const SplitPlan& plan, const std::string& listen_at) {
  if (plan.rank < 0) {
    exchange_over(parent, plan, {});
    return nullptr;
  }
  return std::make_shared<Backend>(
      subgroup_env(parent_env, plan), listen_at,
      [&parent, &plan](const HostPort& mine) { return exchange_over(parent, plan, mine); });
}

}  // namespace rlx
