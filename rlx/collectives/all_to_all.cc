// All-to-all over Links: every rank sends block j of its input to rank j,
// in one step to every peer at once (one round trip), or in n - 1 pairwise
// steps (rank r sends to r + s while it receives from r - s), each block
// over every lane, so no rank is sent to by all the others at once.
#include <algorithm>
#include <cstring>

#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/step.h"

namespace rlx {
namespace {

// Per block: from here a pairwise step splits the block over the lanes.
constexpr std::size_t kSplitBlockBytes = std::size_t{256} << 10;

struct Blocks {
  const std::byte* in;
  std::byte* out;
  std::size_t bytes;  // one block
  std::span<const std::byte> sent_to(int rank) const {
    return {in + static_cast<std::size_t>(rank) * bytes, bytes};
  }
  std::span<std::byte> received_from(int rank) const {
    return {out + static_cast<std::size_t>(rank) * bytes, bytes};
  }
};

void exchange_directly(Links& links, const CollectiveCall& call, const Blocks& blocks) {
  Step step;
  for (int peer = 0; peer < links.world_size(); ++peer) {
    if (peer == links.rank()) continue;
    step.send(peer, 0, blocks.sent_to(peer));
    step.recv(peer, 0, blocks.received_from(peer), false);
  }
  step.run(links, call, 0);
}

void exchange_pairwise(Links& links, const CollectiveCall& call, const Blocks& blocks) {
  const int n = links.world_size(), rank = links.rank();
  const std::size_t lanes = blocks.bytes < kSplitBlockBytes
                                ? 1
                                : static_cast<std::size_t>(std::min(links.lanes(), kMaxLanes));
  Step step;
  for (int distance = 1; distance < n; ++distance) {
    const int to = ring_mod(rank + distance, n), from = ring_mod(rank - distance, n);
    const std::span<const std::byte> out = blocks.sent_to(to);
    const std::span<std::byte> in = blocks.received_from(from);
    for (std::size_t lane = 0; lane < lanes; ++lane) {
      const ElementRange part = split_range(blocks.bytes, lanes, lane);
      step.send(to, static_cast<int>(lane), out.subspan(part.begin, part.size()));
      step.recv(from, static_cast<int>(lane), in.subspan(part.begin, part.size()), false);
    }
    step.run(links, call, static_cast<std::uint32_t>(distance - 1));
  }
}

// The blocks of `input` and `output`, this rank's own copied across; an
// input that is the output is first copied to links.scratch().
Blocks prepare(Links& links, ConstElementSpan input, ElementSpan output) {
  const std::size_t block = input.bytes() / static_cast<std::size_t>(links.world_size());
  const auto* in = static_cast<const std::byte*>(input.data);
  auto* out = static_cast<std::byte*>(output.data);
  if (in == out && block > 0) {
    // In place: the blocks still to send would be overwritten by those received.
    const std::span<std::byte> copy = links.scratch(input.bytes());
    std::memcpy(copy.data(), in, input.bytes());
    in = copy.data();
  }
  const Blocks blocks{in, out, block};
  const int rank = links.rank();
  if (block > 0 && in != out)
    std::memcpy(blocks.received_from(rank).data(), blocks.sent_to(rank).data(), block);
  return blocks;
}

}  // namespace

void all_to_all_direct(Links& links, const CollectiveCall& call, ConstElementSpan input,
                       ElementSpan output) {
  exchange_directly(links, call, prepare(links, input, output));
}

void all_to_all_pairwise(Links& links, const CollectiveCall& call, ConstElementSpan input,
                         ElementSpan output) {
  exchange_pairwise(links, call, prepare(links, input, output));
}

}  // namespace rlx
