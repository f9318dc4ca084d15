// A Transport whose collectives are this folder's algorithms over a Links:
// what the TCP and verbs transports share. Each collective call takes the
// next sequence number, so every rank's n-th call carries the same
// CollectiveCall and a rank that called something else fails with mismatch.
#pragma once

#include <cstdint>

#include "collectives/links.h"
#include "collectives/tuning.h"
#include "transport/transport.h"

namespace rlx {

class LinksTransport : public Transport {
 protected:
  // A transport of rank env.rank in a group of env.world_size, whose
  // algorithms are tuned by env's settings (tuning_for).
  LinksTransport(const launch_env::LaunchEnv& env, std::string backend);

  // The backend's links; called only once the group is connected.
  virtual Links& links() = 0;
  // Throws the job's first failure, if any, before a collective starts.
  virtual void check_not_failed() = 0;

  void do_all_reduce(ElementSpan data, ReduceOp op) final;
  void do_all_gather(ConstElementSpan input, ElementSpan output) final;
  void do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) final;
  void do_barrier() final;

 private:
  CollectiveCall next_call(CollectiveKind kind, ReduceOp op, Dtype dtype, std::uint64_t count);

  const Tuning tuning_;
  std::uint64_t sequence_ = 0;
};

}  // namespace rlx
