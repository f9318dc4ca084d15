// Uneven all-to-all over Links: every pair's block in one step, or in n - 1
// pairwise steps when the peers outnumber a step's room. Each frame's length
// is checked against what its receiver expects, so a send count that is not
// the receiver's receive count fails both with mismatch.
#include <cstring>

#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {
void all_to_all_v(Links& links, const CollectiveCall& call, ConstElementSpan input,
                  std::span<const std::size_t> send_counts, ElementSpan output,
                  std::span<const std::size_t> recv_counts) {
  const int n = links.world_size(), rank = links.rank();
  const std::size_t element = size_of(call.dtype);
  const auto* in = static_cast<const std::byte*>(input.data);
  auto* out = static_cast<std::byte*>(output.data);
  const auto sent_to = [&](int r) {
    return std::span(in + elements_before(send_counts, r) * element,
                     send_counts[static_cast<std::size_t>(r)] * element);
  };
  const auto received_from = [&](int r) {
    return std::span(out + elements_before(recv_counts, r) * element,
                     recv_counts[static_cast<std::size_t>(r)] * element);
  };
  const std::span<const std::byte> own = sent_to(rank);
  if (!own.empty()) std::memcpy(received_from(rank).data(), own.data(), own.size());
  Step step;
  if (n - 1 <= static_cast<int>(Step::kCapacity)) {
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      step.send(peer, 0, sent_to(peer));
      step.recv(peer, 0, received_from(peer), false);
    }
    return step.run(links, call, 0);
  }
  for (int distance = 1; distance < n; ++distance) {
    const int to = ring_mod(rank + distance, n), from = ring_mod(rank - distance, n);
    step.send(to, 0, sent_to(to));
    step.recv(from, 0, received_from(from), false);
    step.run(links, call, static_cast<std::uint32_t>(distance - 1));
  }
}

}  // namespace rlx
