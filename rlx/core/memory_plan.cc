#include "rlx/core/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace rlx::detail {
namespace {

std::size_t round_up(std::size_t bytes, std::size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

bool live_together(const BufferLifetime& a, const BufferLifetime& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}

}  // namespace

ArenaLayout lay_out_arena(std::span<const BufferLifetime> buffers, std::size_t alignment) {
  std::vector<std::size_t> by_size(buffers.size());
  std::iota(by_size.begin(), by_size.end(), std::size_t{0});
  std::stable_sort(by_size.begin(), by_size.end(), [&](std::size_t a, std::size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  ArenaLayout layout;
  layout.offsets.assign(buffers.size(), 0);
  std::vector<std::size_t> placed;
  for (std::size_t index : by_size) {
    const BufferLifetime& buffer = buffers[index];
    const std::size_t bytes = round_up(buffer.bytes, alignment);
    // The conflicting neighbours by offset; try the gap before each.
    std::vector<std::size_t> neighbours;
    for (std::size_t other : placed) {
      if (live_together(buffers[other], buffer)) neighbours.push_back(other);
    }
    std::sort(neighbours.begin(), neighbours.end(),
              [&](std::size_t a, std::size_t b) { return layout.offsets[a] < layout.offsets[b]; });
    std::size_t offset = 0;
    for (std::size_t other : neighbours) {
      if (offset + bytes <= layout.offsets[other]) break;
      offset = std::max(offset, layout.offsets[other] + round_up(buffers[other].bytes, alignment));
    }
    layout.offsets[index] = offset;
    layout.bytes = std::max(layout.bytes, offset + bytes);
    placed.push_back(index);
  }
  return layout;
}

}  // namespace rlx::detail
