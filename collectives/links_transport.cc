#include "collectives/links_transport.h"

#include "collectives/algorithms.h"

namespace rlx {

LinksTransport::LinksTransport(const launch_env::LaunchEnv& env, std::string backend)
    : Transport(env.rank.value_or(0), env.world_size.value_or(1), std::move(backend), env.timeout),
      tuning_(tuning_for(env)) {}

CollectiveCall LinksTransport::next_call(CollectiveKind kind, ReduceOp op, Dtype dtype,
                                         std::uint64_t count) {
  check_not_failed();
  return {kind, op, dtype, count, sequence_++};
}

void LinksTransport::do_all_reduce(ElementSpan data, ReduceOp op) {
  rlx::all_reduce(links(), next_call(CollectiveKind::all_reduce, op, data.dtype, data.count), data,
                  tuning_);
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
