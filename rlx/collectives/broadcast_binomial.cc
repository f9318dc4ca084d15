#include <bit>

#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {
void broadcast(Links& links, const CollectiveCall& call, ElementSpan data) {
  const int n = links.world_size();
  // Work in ranks relative to the root, so the root is 0 of a binomial tree.
  const int relative = ring_mod(links.rank() - call.root, n);
  // The root sends farthest first, a step each (a large send may wait for
  // its receiver): only with 2 ranks is its first send to the rank after it.
  RootCheck root_check(
      links, call,
      {.sent_by_tree = n == 2 && relative == 0, .received_by_tree = n == 2 && relative == 1});
  const auto bytes = std::span(static_cast<std::byte*>(data.data), data.bytes());
  Step step;
  int mask = 1;
  // Receive once from the parent: the rank that differs in our lowest set bit.
  while (mask < n) {
    if ((relative & mask) != 0) {
      step.recv(ring_mod(relative - mask + call.root, n), 0, bytes, false);
      step.run(links, call,
               static_cast<std::uint32_t>(std::countr_zero(static_cast<unsigned>(mask))));
      break;
    }
    mask <<= 1;
  }
  // Then send to every child below that bit, farthest first.
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (relative + mask < n) {
      step.send(ring_mod(relative + mask + call.root, n), 0, bytes);
      step.run(links, call,
               static_cast<std::uint32_t>(std::countr_zero(static_cast<unsigned>(mask))));
    }
  }
  root_check.finish();
}

}  // namespace rlx
