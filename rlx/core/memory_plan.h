// Where a compiled graph's intermediates live: one arena, each buffer at an
// offset no buffer alive at the same time overlaps. Internal to core.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace rlx::detail {

// A buffer of the plan: alive from the step that writes it to the last step
// that reads it, both included.
struct BufferLifetime {
  std::size_t first_step;
  std::size_t last_step;
  std::size_t bytes;
};

struct ArenaLayout {
  std::vector<std::size_t> offsets;  // one per lifetime, multiples of `alignment`
  std::size_t bytes = 0;             // the arena's size
};

// Greedy by size, largest first, each at the lowest offset that overlaps no
// buffer already placed whose lifetime overlaps its own (TFLite's arena
// planner does the same). Buffers whose lifetimes are disjoint share bytes.
ArenaLayout lay_out_arena(std::span<const BufferLifetime> buffers, std::size_t alignment);

}  // namespace rlx::detail
