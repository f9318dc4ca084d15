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
// shows its call, root included, to its right neighbour and reads its left
// neighbour's before it returns: when every rank's left neighbour made the
// same call, every rank did, and otherwise some rank fails with mismatch.
// Each rank's frame to its right neighbour leaves as its call starts, before
// it waits for anything, so a rank whose tree then waits forever (its view
// of the tree is not its peers') finds its left neighbour's frame unread
// beside the step (LaneLinks::watch_other_sockets) and fails with mismatch
// when it names another call. That is why a tree frame stands in for the
// check frame only where the tree starts sending it first thing (its header
// leaves before the rank waits for anything), and why the ring
// runs the same way for every rooted collective: otherwise ranks in
// different calls can wait on each other in a cycle with every frame they
// hold agreeing with them (root_check_model_test.py finds such mixes under
// looser rules, and none under these).
RootCheck::RootCheck(Links& links, const CollectiveCall& call, RootCheckRoute route)
    : links_(links), call_(call), route_(route), beside_(links.lanes() > kCheckLane) {
  const int n = links.world_size(), rank = links.rank();
  if (n == 1) return;
  Step step;
  if (!beside_) {
    // With one lane the check frame could sit ahead of a tree frame on a
    // socket: the whole check runs first, as one step.
    step.send(ring_mod(rank + 1, n), 0, {});
    step.recv(ring_mod(rank - 1, n), 0, {}, false);
  } else if (!route.sent_by_tree) {
    step.send(ring_mod(rank + 1, n), kCheckLane, {});
  }
  step.run(links, call, kRootCheckStep);
}

void RootCheck::finish() {
  const int n = links_.world_size(), rank = links_.rank();
  if (n == 1 || !beside_ || route_.received_by_tree) return;
  Step step;
  step.recv(ring_mod(rank - 1, n), kCheckLane, {}, false);
  step.run(links_, call_, kRootCheckStep);
}

}  // namespace rlx
