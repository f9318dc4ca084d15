#include <cstring>

#include "rlx/collectives/algorithms.h"

namespace rlx {

void reduce_scatter(Links& links, const CollectiveCall& call, ConstElementSpan input,
                    ElementSpan output) {
  // The ring reduces in place and uses the other blocks as it goes: work on
  // a copy in the links' reusable scratch, never on the caller's input.
  const std::span<std::byte> work = links.scratch(input.bytes()).first(input.bytes());
  if (!work.empty()) std::memcpy(work.data(), input.data, work.size());
  // Zero-length calls run too, so a rank whose size differs still gets a mismatch error.
  reduce_scatter_ring(links, call, ElementSpan{work.data(), input.count, input.dtype});
  if (output.count > 0) {
    std::memcpy(output.data, work.data() + static_cast<std::size_t>(links.rank()) * output.bytes(),
                output.bytes());
  }
}

}  // namespace rlx
