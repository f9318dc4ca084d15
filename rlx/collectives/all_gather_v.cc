// Uneven all-gather over Links: every rank's block straight to every other
// rank in one step, or around the ring (n - 1 steps, each passing on the
// block received last) when the peers outnumber a step's room. Every frame's
// length is checked against the receiver's counts, so ranks that disagree on
// the counts fail with mismatch.
#include <cstring>

#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {
void all_gather_v(Links& links, const CollectiveCall& call, ConstElementSpan input,
                  ElementSpan output, std::span<const std::size_t> counts) {
  const int n = links.world_size(), rank = links.rank();
  const std::size_t element = size_of(call.dtype);
  auto* out = static_cast<std::byte*>(output.data);
  const auto block = [&](int r) {
    return std::span(out + elements_before(counts, r) * element,
                     counts[static_cast<std::size_t>(r)] * element);
  };
  const std::span<std::byte> own = block(rank);
  if (!own.empty() && own.data() != input.data) std::memmove(own.data(), input.data, own.size());
  Step step;
  if (n - 1 <= static_cast<int>(Step::kCapacity)) {
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      step.send(peer, 0, own);
      step.recv(peer, 0, block(peer), false);
    }
    return step.run(links, call, 0);
  }
  const int right = ring_mod(rank + 1, n), left = ring_mod(rank - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    step.send(right, 0, block(ring_mod(rank - s, n)));
    step.recv(left, 0, block(ring_mod(rank - s - 1, n)), false);
    step.run(links, call, static_cast<std::uint32_t>(s));
  }
}

}  // namespace rlx
