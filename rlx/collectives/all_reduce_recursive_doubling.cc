#include <bit>
#include <cstring>

#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {

void all_reduce_recursive_doubling(Links& links, const CollectiveCall& call, ElementSpan data) {
  const int n = links.world_size(), rank = links.rank();
  const int pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extra = n - pow2;
  const auto bytes = std::span(static_cast<std::byte*>(data.data), data.bytes());
  Step step;
  std::uint32_t step_index = 0;

  // Fold: rank pow2 + i hands its buffer to rank i and waits for the result.
  if (rank >= pow2) {
    step.send(rank - pow2, 0, bytes);
    step.run(links, call, step_index);
    step.recv(rank - pow2, 0, bytes, false);
    step.run(links, call,
             1 + static_cast<std::uint32_t>(std::countr_zero(static_cast<unsigned>(pow2))));
    return;
  }
  if (rank < extra) {
    step.recv(rank + pow2, 0, bytes, true);
    step.run(links, call, step_index);
  }
  // Exchange with partners at distances 1, 2, 4, ...; the copy is what we
  // send while the incoming buffer is reduced into `data`.
  const auto sent = links.scratch(bytes.size()).first(bytes.size());
  for (int distance = 1; distance < pow2; distance *= 2) {
    ++step_index;
    if (!bytes.empty()) std::memcpy(sent.data(), bytes.data(), bytes.size());
    step.send(rank ^ distance, 0, sent);
    step.recv(rank ^ distance, 0, bytes, true);
    step.run(links, call, step_index);
  }
  if (rank < extra) {
    step.send(rank + pow2, 0, bytes);
    step.run(links, call, step_index + 1);
  }
}

}  // namespace rlx
