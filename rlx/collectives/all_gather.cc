#include <algorithm>
#include <bit>
#include <cstring>

#include "rlx/collectives/algorithm_table.h"
#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/ring.h"

namespace rlx {
namespace {

// Copies this rank's contribution into its block of the output.
void place_own_block(ConstElementSpan input, ElementSpan output, int rank) {
  auto* own = static_cast<std::byte*>(output.data) + static_cast<std::size_t>(rank) * input.bytes();
  if (input.bytes() > 0 && own != input.data) std::memmove(own, input.data, input.bytes());
}

// Per rank's block: from here the direct exchange splits it over the lanes.
constexpr std::size_t kDirectSplitBytes = std::size_t{256} << 10;

// As many lanes as the step has room for, one send per peer and lane.
std::size_t direct_lanes(const Links& links) {
  const auto peers = static_cast<std::size_t>(std::max(links.world_size() - 1, 1));
  const auto lanes = static_cast<std::size_t>(std::min(links.lanes(), kMaxLanes));
  return std::max<std::size_t>(1, std::min(lanes, Step::kCapacity / peers));
}

}  // namespace

void all_gather_ring(Links& links, const CollectiveCall& call, ConstElementSpan input,
                     ElementSpan output) {
  place_own_block(input, output, links.rank());
  const ring::SubRings subs = ring::plan(links);
  // Sub-ring s carries part s of every rank's block.
  auto locate = [&](int s, int block_rank) {
    const ElementRange part =
        split_range(input.count, static_cast<std::size_t>(subs.count), static_cast<std::size_t>(s));
    return bytes_of(output, static_cast<std::size_t>(block_rank) * input.count, part);
  };
  // Position u starts with the block of the rank standing there in its direction.
  auto rank_at = [&](int s, long long position) {
    return subs.rings[static_cast<std::size_t>(s)].view.rank_at(position);
  };
  ring::run_phase(links, call, subs, locate, rank_at, /*reduce=*/false, 0);
}

void all_gather_direct(Links& links, const CollectiveCall& call, ConstElementSpan input,
                       ElementSpan output) {
  const int n = links.world_size(), rank = links.rank();
  place_own_block(input, output, rank);
  // Large blocks go over every lane, as the ring's do: one TCP stream
  // cannot fill a link. Small ones over one, a frame each.
  const std::size_t lanes = input.bytes() < kDirectSplitBytes ? 1 : direct_lanes(links);
  const auto* own = static_cast<const std::byte*>(input.data);
  const std::size_t element = size_of(input.dtype);
  Step step;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    for (std::size_t lane = 0; lane < lanes; ++lane) {
      const ElementRange part = split_range(input.count, lanes, lane);
      const int lane_index = static_cast<int>(lane);
      step.send(peer, lane_index, {own + part.begin * element, part.size() * element});
      step.recv(peer, lane_index,
                bytes_of(output, static_cast<std::size_t>(peer) * input.count, part), false);
    }
  }
  step.run(links, call, 0);
}

void all_gather_recursive_doubling(Links& links, const CollectiveCall& call, ConstElementSpan input,
                                   ElementSpan output) {
  const int n = links.world_size(), rank = links.rank();
  if (!std::has_single_bit(static_cast<unsigned>(n))) {
    throw CollectiveError(
        ErrorKind::invalid_argument, {.rank = rank, .world_size = n, .operation = call.describe()},
        "recursive-doubling all_gather needs a power-of-two world size, not " + std::to_string(n));
  }
  place_own_block(input, output, rank);
  auto* out = static_cast<std::byte*>(output.data);
  const std::size_t block = input.bytes();
  // Before the exchange at `distance`, a rank holds its aligned group of
  // `distance` blocks, contiguous in `output`; the partner's group is next to it.
  auto group = [&](int member, int distance) {
    const auto first = static_cast<std::size_t>(member & ~(distance - 1));
    return std::span(out + first * block, static_cast<std::size_t>(distance) * block);
  };
  Step step;
  std::uint32_t step_index = 0;
  for (int distance = 1; distance < n; distance *= 2) {
    const int partner = rank ^ distance;
    step.send(partner, 0, group(rank, distance));
    step.recv(partner, 0, group(partner, distance), false);
    step.run(links, call, step_index++);
  }
}

// Per rank's contribution. At 4 ranks the direct exchange took 200 us for
// 64 KiB each where the ring took 390 us; the ring won from 1 MiB each.
std::size_t all_gather_ring_threshold(int world_size) {
  return world_size <= 2 ? std::size_t{1} << 30 : std::size_t{512} << 10;
}

void all_gather(Links& links, const CollectiveCall& call, ConstElementSpan input,
                ElementSpan output) {
  static const Tuning kDefaults;
  const CallSituation situation{.call = call,
                                .rank = links.rank(),
                                .ranks = links.world_size(),
                                .bytes = input.bytes(),
                                .nested = true};
  AlgorithmContext context{links, nullptr, kDefaults};
  run_chosen(context, situation, {.input = input, .output = output});
}

}  // namespace rlx
