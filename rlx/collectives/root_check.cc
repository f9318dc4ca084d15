#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {
namespace {

// Numbered apart from the rooted algorithms' own steps.
constexpr std::uint32_t kRootCheckStep = 1u << 16;
// The lane the check frames ride on when there are two: no tree step of a
// rooted algorithm uses it, so a check frame never sits ahead of a tree
// frame on one socket, and the tree runs while the check is in flight.
constexpr int kCheckLane = 1;

}  // namespace

// Ranks that disagree on the root could each finish a tree of their own with
// no frame between them (a root receives nothing in a broadcast, sends
// nothing in a gather), leaving different data and no error. So every rank
// shows its call, root included, to its neighbour on one side and reads the
// other neighbour's before it returns: when every rank's neighbour made the
// same call, every rank did, and otherwise some rank fails with mismatch.
// A tree frame between the same two ranks carries the call too, and stands
// in for the check frame: when the two disagree on whether it comes, one
// waits for a frame that never does and finds the other's unread beside it
// (LaneLinks::watch_other_sockets), a mismatch.
RootCheck::RootCheck(Links& links, const CollectiveCall& call, RootCheckRoute route)
    : links_(links), call_(call), route_(route), beside_(links.lanes() > kCheckLane) {
  const int n = links.world_size(), rank = links.rank();
  if (n == 1) return;
  Step step;
  if (!beside_) {
    // With one lane the check frame could sit ahead of a tree frame on a
    // socket: the whole check runs first, as one step.
    step.send(ring_mod(rank + route.toward, n), 0, {});
    step.recv(ring_mod(rank - route.toward, n), 0, {}, false);
  } else if (!route.sent_by_tree) {
    step.send(ring_mod(rank + route.toward, n), kCheckLane, {});
  }
  step.run(links, call, kRootCheckStep);
}

void RootCheck::finish() {
  const int n = links_.world_size(), rank = links_.rank();
  if (n == 1 || !beside_ || route_.received_by_tree) return;
  Step step;
  step.recv(ring_mod(rank - route_.toward, n), kCheckLane, {}, false);
  step.run(links_, call_, kRootCheckStep);
}

}  // namespace rlx
