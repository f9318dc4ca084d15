// Gather to and scatter from a root directly: every other rank exchanges its
// block with the root in one step; the root takes up to a step's room of
// peers per step.
#include <cstring>

#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {
namespace {

// The root's step for `peer`: peers are taken Step::kCapacity at a time.
std::uint32_t step_of(int peer, int root, int n) {
  const int position = ring_mod(peer - root, n) - 1;  // 0 .. n - 2
  return static_cast<std::uint32_t>(position / static_cast<int>(Step::kCapacity));
}

// Runs `add(step, peer)` for every peer of the root, a step at a time.
template <class Add>
void from_the_root(Links& links, const CollectiveCall& call, Add&& add) {
  const int n = links.world_size(), root = call.root;
  Step step;
  for (int position = 1; position < n; ++position) {
    const int peer = ring_mod(root + position, n);
    add(step, peer);
    if (position == n - 1 || step_of(ring_mod(peer + 1, n), root, n) != step_of(peer, root, n)) {
      step.run(links, call, step_of(peer, root, n));
    }
  }
}

}  // namespace

void gather_direct(Links& links, const CollectiveCall& call, ConstElementSpan input,
                   ElementSpan output) {
  const int n = links.world_size(), rank = links.rank(), root = call.root;
  // The rank before the root sends its block to its right neighbour, the root.
  const int relative = ring_mod(rank - root, n);
  RootCheck root_check(links, call,
                       {.sent_by_tree = relative == n - 1, .received_by_tree = relative == 0});
  const std::size_t block = input.bytes();
  const std::span<const std::byte> mine(static_cast<const std::byte*>(input.data), block);
  if (rank != root) {
    Step step;
    step.send(root, 0, mine);
    step.run(links, call, step_of(rank, root, n));
    return root_check.finish();
  }
  auto* out = static_cast<std::byte*>(output.data);
  if (block > 0 && out + static_cast<std::size_t>(rank) * block != mine.data()) {
    std::memmove(out + static_cast<std::size_t>(rank) * block, mine.data(), block);
  }
  from_the_root(links, call, [&](Step& step, int peer) {
    step.recv(peer, 0, {out + static_cast<std::size_t>(peer) * block, block}, false);
  });
  root_check.finish();
}

void scatter_direct(Links& links, const CollectiveCall& call, ConstElementSpan input,
                    ElementSpan output) {
  const int n = links.world_size(), rank = links.rank(), root = call.root;
  // The root sends its right neighbour its block.
  const int relative = ring_mod(rank - root, n);
  RootCheck root_check(links, call,
                       {.sent_by_tree = relative == 0, .received_by_tree = relative == 1});
  const std::size_t block = output.bytes();
  const std::span<std::byte> mine(static_cast<std::byte*>(output.data), block);
  if (rank != root) {
    Step step;
    step.recv(root, 0, mine, false);
    step.run(links, call, step_of(rank, root, n));
    return root_check.finish();
  }
  const auto* in = static_cast<const std::byte*>(input.data);
  if (block > 0 && in + static_cast<std::size_t>(rank) * block != mine.data()) {
    std::memmove(mine.data(), in + static_cast<std::size_t>(rank) * block, block);
  }
  from_the_root(links, call, [&](Step& step, int peer) {
    step.send(peer, 0, {in + static_cast<std::size_t>(peer) * block, block});
  });
  root_check.finish();
}

}  // namespace rlx
