// Reduce-scatter among the ranks of one host: one-shot when every input fits
// in the call line, else the pipelined direct reduce-scatter.
#include <cstring>

#include "rlx/collectives/shm_collectives.h"

namespace rlx {

void ShmCollectives::reduce_scatter(const CollectiveCall& call, ConstElementSpan input,
                                    ElementSpan output) {
  const auto* in = static_cast<const std::byte*>(input.data);
  const std::size_t offset = static_cast<std::size_t>(local_rank()) * output.bytes();
  if (fits_inline(input.bytes())) {
    const std::uint64_t number = open_call(call, {in, input.bytes()});
    if (output.count == 0) return;
    reduce_in_rank_order(output, call.op, [&](int j) {
      return ConstElementSpan{node_.call_payload(j, number, input.bytes()) + offset, output.count,
                              output.dtype};
    });
    return;
  }
  open_call(call, {});
  reduce_pipelined(call, in, static_cast<std::byte*>(output.data), nullptr,
                   BlockSplit{input.count, local_size()}, /*gathers=*/false);
}

}  // namespace rlx
