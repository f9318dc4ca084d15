#include <bit>

#include "collectives/algorithms.h"
#include "collectives/step.h"

namespace rlx {
namespace {

// Numbered apart from the tree's steps (0 .. log2 n).
constexpr std::uint32_t kRootCheckStep = 1u << 16;

// Ranks that disagree on the root could each finish a tree of their own with
// no frame between them (the root receives nothing), leaving different data
// and no error. So every rank first shows its call, root included, to its
// right neighbour: when every rank's left neighbour made the same call,
// every rank did, and otherwise some rank fails with mismatch.
void check_root_around_the_ring(Links& links, const CollectiveCall& call) {
  const int n = links.world_size(), rank = links.rank();
  Step step;
  step.send(ring_mod(rank + 1, n), 0, {});
  step.recv(ring_mod(rank - 1, n), 0, {}, false);
  step.run(links, call, kRootCheckStep);
}

}  // namespace

void broadcast(Links& links, const CollectiveCall& call, ElementSpan data) {
  const int n = links.world_size();
  check_root_around_the_ring(links, call);
  // Work in ranks relative to the root, so the root is 0 of a binomial tree.
  const int relative = ring_mod(links.rank() - call.root, n);
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
}

}  // namespace rlx
