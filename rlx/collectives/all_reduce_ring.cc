#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/ring.h"

namespace rlx {

void all_reduce_ring(Links& links, const CollectiveCall& call, ElementSpan data) {
  const int n = links.world_size();
  const ring::SubRings subs = ring::plan(links);
  // Sub-ring s owns a contiguous region; its chunks are that region cut in n.
  auto locate = [&](int s, int chunk) {
    const ElementRange region =
        split_range(data.count, static_cast<std::size_t>(subs.count), static_cast<std::size_t>(s));
    return bytes_of(
        data, region.begin,
        split_range(region.size(), static_cast<std::size_t>(n), static_cast<std::size_t>(chunk)));
  };
  auto chunk_at = [n](int, long long position) { return ring_mod(position, n); };
  ring::run_phase(links, call, subs, locate, chunk_at, /*reduce=*/true, 0);
  // Position v now holds chunk v + 1 complete: that is what it starts the all-gather with.
  auto owned_after_reduce = [n](int, long long position) { return ring_mod(position + 1, n); };
  ring::run_phase(links, call, subs, locate, owned_after_reduce, /*reduce=*/false,
                  static_cast<std::uint32_t>(n - 1));
}

void reduce_scatter_ring(Links& links, const CollectiveCall& call, ElementSpan data) {
  const int n = links.world_size();
  // One direction only, so that rank r (= position r) ends with block r.
  ring::SubRings subs;
  const int lanes = links.lanes() < kMaxLanes ? links.lanes() : kMaxLanes;
  for (int lane = 0; lane < lanes; ++lane) {
    subs.rings[static_cast<std::size_t>(subs.count++)] = {{n, links.rank(), 0}, lane};
  }
  const std::size_t block = data.count / static_cast<std::size_t>(n);
  auto locate = [&](int s, int b) {
    const ElementRange part =
        split_range(block, static_cast<std::size_t>(subs.count), static_cast<std::size_t>(s));
    return bytes_of(data, static_cast<std::size_t>(b) * block, part);
  };
  // Position v ends holding label(v + 1) = block v.
  auto block_at = [n](int, long long position) { return ring_mod(position - 1, n); };
  ring::run_phase(links, call, subs, locate, block_at, /*reduce=*/true, 0);
}

}  // namespace rlx
