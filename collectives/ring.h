// The two phases of every ring algorithm, shared by all-reduce,
// reduce-scatter and all-gather (internal to collectives/).
//
// The work is cut into sub-rings, one per (direction, lane), that advance in
// lock step: each step is one Links::exchange holding every sub-ring's send
// and receive, so all lanes and both directions stream at once. Chunks are
// named by labels: `label(sub, position)` is the chunk that ring position
// starts with, and `locate(sub, label)` gives a chunk's bytes.
#pragma once

#include <array>
#include <cstdint>

#include "collectives/step.h"

namespace rlx::ring {

struct SubRing {
  RingView view;
  int lane = 0;
};

struct SubRings {
  std::array<SubRing, 2 * kMaxLanes> rings;
  int count = 0;
};

// Both directions (when n > 2: with two ranks they are the same link) times
// every lane the backend offers.
inline SubRings plan(const Links& links) {
  SubRings out;
  const int n = links.world_size();
  const int directions = n > 2 ? 2 : 1;
  const int lanes = links.lanes() < kMaxLanes ? links.lanes() : kMaxLanes;
  for (int lane = 0; lane < lanes; ++lane) {
    for (int direction = 0; direction < directions; ++direction) {
      out.rings[static_cast<std::size_t>(out.count++)] = {{n, links.rank(), direction}, lane};
    }
  }
  return out;
}

// n-1 steps; chunk label(u) starts at ring position u. Each step sends the
// chunk accumulated so far to the right and reduces the one from the left.
// Afterwards position v holds the full reduction of chunk label(v + 1).
template <class Locate, class Label>
void reduce_scatter(Links& links, const CollectiveCall& call, const SubRings& subs, Locate locate,
                    Label label, std::uint32_t first_step) {
  Step step;
  const int n = links.world_size();
  for (int k = 0; k + 1 < n; ++k) {
    for (int s = 0; s < subs.count; ++s) {
      const SubRing& sub = subs.rings[static_cast<std::size_t>(s)];
      const int v = sub.view.position();
      step.send(sub.view.right(), sub.lane, locate(s, label(s, v - k)));
      step.recv(sub.view.left(), sub.lane, locate(s, label(s, v - k - 1)), true);
    }
    step.run(links, call, first_step + static_cast<std::uint32_t>(k));
  }
}

// n-1 steps; position u starts owning the complete chunk label(u). Each step
// forwards the chunk received last to the right.
template <class Locate, class Label>
void all_gather(Links& links, const CollectiveCall& call, const SubRings& subs, Locate locate,
                Label label, std::uint32_t first_step) {
  Step step;
  const int n = links.world_size();
  for (int k = 0; k + 1 < n; ++k) {
    for (int s = 0; s < subs.count; ++s) {
      const SubRing& sub = subs.rings[static_cast<std::size_t>(s)];
      const int v = sub.view.position();
      step.send(sub.view.right(), sub.lane, locate(s, label(s, v - k)));
      step.recv(sub.view.left(), sub.lane, locate(s, label(s, v - k - 1)), false);
    }
    step.run(links, call, first_step + static_cast<std::uint32_t>(k));
  }
}

}  // namespace rlx::ring
