// What TCP and verbs share to set up a group that split() made: the new
// group's settings, and its ranks' endpoints exchanged over the parent group
// (instead of rlxrun's rendezvous).
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rlx/transport/endpoint.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/transport.h"

namespace rlx {

// How a starting transport learns every rank's endpoint from its own.
using EndpointExchange = std::function<std::vector<HostPort>(const HostPort& mine)>;

// What a starting transport checks while it waits for its peers' connections,
// besides its deadline: it throws to end the set-up at once. A group that
// split() makes ends so when its parent fails.
using SetupWatch = std::function<void()>;

// What split_as needs of the parent's backend besides its collectives.
struct ParentFailure {
  // Fails the parent with this rank's error and tells its other ranks.
  std::function<void(const CollectiveError&)> fail;
  // Where the parent records its failure: the new group's set-up watches it.
  const FailureLatch& latch;
};

// The parent's settings for the new group: its rank and size, and a job
// token of its own (an HMAC of the parent's, the split's number and the
// color), so its connections and shared memory are the new group's alone.
launch_env::LaunchEnv subgroup_env(const launch_env::LaunchEnv& parent, const SplitPlan& plan);

// Gathers `mine` over `parent` (every rank of the parent calls it, members
// of the new group or not) and returns the new group's endpoints in its
// rank order. Throws invalid_argument for a host name over 255 bytes.
std::vector<HostPort> exchange_over(Transport& parent, const SplitPlan& plan, const HostPort& mine);

// What split_as tells the parent's other ranks when this rank's part of the
// new group failed with `error`: its kind, detail and hint, at this rank's
// split in the parent, blaming a peer only by its rank in the parent.
CollectiveError setup_failure(Transport& parent, const SplitPlan& plan, std::exception_ptr error);

// split() for a backend whose groups are new transports of its own kind
// (TCP, verbs): `Backend(env, listen_at, exchange, watch)` starts the new
// group with its endpoints exchanged over `parent`, and ends its connection
// waits when the parent fails. A rank the split leaves out (plan.rank < 0)
// still takes part in the exchange, and gets no group. A rank that cannot
// make its part (out of descriptors, a peer gone) fails the parent, so the
// other ranks leave their waits at once with its error instead of timing
// out; a transport that failed in a collective is not used again. Every
// rank then meets the others in a barrier of the parent, so one rank's
// failure fails the split on every rank, whatever its color.
template <class Backend>
std::shared_ptr<Transport> split_as(Transport& parent, const launch_env::LaunchEnv& parent_env,
                                    const SplitPlan& plan, const std::string& listen_at,
                                    const ParentFailure& parent_failure) {
  std::shared_ptr<Transport> group;
  if (plan.rank < 0) {
    exchange_over(parent, plan, {});
  } else {
    const FailureLatch& latch = parent_failure.latch;
    bool parent_failed = false;
    try {
      group = std::make_shared<Backend>(
          subgroup_env(parent_env, plan), listen_at,
          [&parent, &plan, &parent_failed](const HostPort& mine) {
            try {
              return exchange_over(parent, plan, mine);
            } catch (...) {
              parent_failed = true;  // the parent's own collective, in its numbering
              throw;
            }
          },
          [&parent, &latch, &parent_failed] {
            parent_failed = latch.tripped();
            if (parent_failed) latch.rethrow_if_tripped(parent.site("split"));
          });
    } catch (...) {
      if (parent_failed) throw;  // the parent's failure, already in its numbering
      // This rank's own failure, as the others hear it if it is the first:
      // at the parent's split, in its numbering (a failure after another
      // rank's is this rank's own cause, which the others never hear).
      CollectiveError failure = setup_failure(parent, plan, std::current_exception());
      parent_failure.fail(failure);
      throw failure;
    }
  }
  parent.barrier();
  return group;
}

}  // namespace rlx
