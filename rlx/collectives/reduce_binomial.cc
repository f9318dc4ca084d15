// Reduce to a root over a binomial tree (ranks relative to the root): each
// rank reduces what its children send into its accumulator as it streams in,
// then sends the accumulator to its parent. The root's accumulator is its
// buffer; the others' is scratch, so their buffers stay as they were.
#include <bit>
#include <cstring>

#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {

void reduce_binomial(Links& links, const CollectiveCall& call, ElementSpan data) {
  const int n = links.world_size(), root = call.root;
  const int relative = ring_mod(links.rank() - root, n);
  // The tree's frames flow leftwards, against the check's, except with 2
  // ranks, where the left neighbour is the right one: the leaf's one send.
  RootCheck root_check(
      links, call,
      {.sent_by_tree = n == 2 && relative == 1, .received_by_tree = n == 2 && relative == 0});
  std::span<std::byte> accumulator(static_cast<std::byte*>(data.data), data.bytes());
  if (relative != 0 && !accumulator.empty()) {
    const std::span<std::byte> scratch = links.scratch(accumulator.size());
    std::memcpy(scratch.data(), accumulator.data(), accumulator.size());
    accumulator = scratch.first(accumulator.size());
  }
  Step step;
  for (int mask = 1; mask < n; mask <<= 1) {
    const auto index = static_cast<std::uint32_t>(std::countr_zero(static_cast<unsigned>(mask)));
    if ((relative & mask) != 0) {
      step.send(ring_mod(relative - mask + root, n), 0, accumulator);
      step.run(links, call, index);
      break;
    }
    if (relative + mask < n) {
      step.recv(ring_mod(relative + mask + root, n), 0, accumulator, /*reduce=*/true);
      step.run(links, call, index);
    }
  }
  root_check.finish();
}

}  // namespace rlx
