// The two phases of every ring algorithm, shared by all-reduce,
// reduce-scatter and all-gather (internal to rlx/collectives/).
//
// The work is cut into sub-rings, one per (direction, lane), that advance in
// lock step: each step is one Links::exchange holding every sub-ring's send
// and receive, so all lanes and both directions stream at once. Chunks are
// named by labels: `label(sub, position)` is the chunk that ring position
// starts with, and `locate(sub, label)` gives a chunk's bytes.
#pragma once

#include <array>
#include <cstdint>

#include "rlx/collectives/step.h"

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

// n-1 steps around every sub-ring. At step k, position v sends chunk
// label(v - k) to the right and receives label(v - k - 1) from the left.
//  * reduce = true (reduce-scatter): position u starts with its own
//    contribution to every chunk; each receive is reduced into the local
//    chunk, and afterwards position v holds chunk label(v + 1) complete.
//  * reduce = false (all-gather): position u starts owning the complete
//    chunk label(u); each receive overwrites, and afterwards every position
//    holds every chunk.
template <class Locate, class Label>
void run_phase(Links& links, const CollectiveCall& call, const SubRings& subs, Locate locate,
               Label label, bool reduce, std::uint32_t first_step) {
  Step step;
  const int n = links.world_size();
  for (int k = 0; k + 1 < n; ++k) {
    for (int s = 0; s < subs.count; ++s) {
      const SubRing& sub = subs.rings[static_cast<std::size_t>(s)];
      const int v = sub.view.position();
      step.send(sub.view.right(), sub.lane, locate(s, label(s, v - k)));
      step.recv(sub.view.left(), sub.lane, locate(s, label(s, v - k - 1)), reduce);
    }
    step.run(links, call, first_step + static_cast<std::uint32_t>(k));
  }
}

}  // namespace rlx::ring
