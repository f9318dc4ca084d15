#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {
namespace {

// Numbered apart from the rooted algorithms' own steps.
constexpr std::uint32_t kRootCheckStep = 1u << 16;

}  // namespace

// Ranks that disagree on the root could each finish a tree of their own with
// no frame between them (a root receives nothing in a broadcast, sends
// nothing in a gather), leaving different data and no error. So every rank
// first shows its call, root included, to its right neighbour: when every
// rank's left neighbour made the same call, every rank did, and otherwise
// some rank fails with mismatch.
void check_root_around_the_ring(Links& links, const CollectiveCall& call) {
  const int n = links.world_size(), rank = links.rank();
  Step step;
  step.send(ring_mod(rank + 1, n), 0, {});
  step.recv(ring_mod(rank - 1, n), 0, {}, false);
  step.run(links, call, kRootCheckStep);
}

}  // namespace rlx
