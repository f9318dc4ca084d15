#include "rlx/backends/mpi/mpi.h"

namespace rlx::mpi {

bool is_built() { return false; }

std::shared_ptr<Transport> create(const launch_env::LaunchEnv&) {
  throw CollectiveError(ErrorKind::backend_unavailable, {.operation = "init mpi"},
                        "this rlx was built without the Open MPI transport",
                        "install libopenmpi-dev and openmpi-bin, then reconfigure rlx with "
                        "-DRLX_WITH_MPI=AUTO or ON (or, for a project that found rlx with "
                        "find_package, that project: its mpi component was not found)");
}

}  // namespace rlx::mpi
