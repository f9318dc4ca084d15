#include "collectives/links_transport.h"

#include "collectives/algorithms.h"

namespace rlx {

CollectiveCall LinksTransport::next_call(CollectiveKind kind, ReduceOp op, Dtype dtype,
                                         std::uint64_t count) {
  check_not_failed();
  return {kind, op, dtype, count, sequence_++};
}

void LinksTransport::do_all_reduce(ElementSpan data, ReduceOp op) {
  rlx::all_reduce(links(), next_call(CollectiveKind::all_reduce, op, data.dtype, data.count), data);
}

void LinksTransport::do_all_gather(ConstElementSpan input, ElementSpan output) {
  rlx::all_gather(links(),
                  next_call(CollectiveKind::all_gather, ReduceOp::sum, input.dtype, input.count),
                  input, output);
}

void LinksTransport::do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) {
  rlx::reduce_scatter(links(),
                      next_call(CollectiveKind::reduce_scatter, op, output.dtype, output.count),
                      input, output);
}

void LinksTransport::do_barrier() {
  barrier_dissemination(links(), next_call(CollectiveKind::barrier, ReduceOp::sum, Dtype::u8, 0));
}

}  // namespace rlx
