#include "rlx/transport/bounded_spin.h"

#include "rlx/transport/launch_env.h"

namespace rlx {

namespace {

// The same bound served every case best (docs/BENCHMARKS.md).
constexpr std::chrono::microseconds kBound{50};

}  // namespace

BoundedSpin bounded_spin_for(int ranks_on_host) {
  return {.bound = kBound, .yield = launch_env::ranks_share_cores(ranks_on_host)};
}

BoundedSpin bounded_spin_for_delivery() { return {.bound = kBound, .yield = true}; }

}  // namespace rlx
