#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {

void barrier_dissemination(Links& links, const CollectiveCall& call) {
  const int n = links.world_size(), rank = links.rank();
  Step step;
  std::uint32_t round = 0;
  // After round k a rank has heard, directly or through others, from the
  // 2^(k+1) - 1 ranks before it; after ceil(log2 n) rounds, from everyone.
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    step.send(ring_mod(rank + distance, n), 0, {});
    step.recv(ring_mod(rank - distance, n), 0, {}, false);
    step.run(links, call, round);
  }
}

}  // namespace rlx
