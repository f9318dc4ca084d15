// Placeholder until the TCP ring transport lands (issue 4): a multi-rank
// rlxrun job cannot start yet, and says so instead of pretending.
#include "transport/tcp/tcp.h"

namespace rlx::tcp {

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env) {
  throw CollectiveError(ErrorKind::backend_unavailable,
                        {.rank = env.rank.value_or(-1),
                         .world_size = env.world_size.value_or(-1),
                         .operation = "init tcp"},
                        "the TCP transport is not part of this build yet",
                        "run with one rank, or under mpirun with the mpi backend");
}

}  // namespace rlx::tcp
