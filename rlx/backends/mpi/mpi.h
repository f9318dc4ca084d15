// Entry points of the Open MPI transport. rlx/backends/mpi/no_mpi.cc implements
// them when rlx is built without MPI (RLX_WITH_MPI=OFF, or AUTO without Open MPI).
#pragma once

#include <memory>

#include "rlx/transport/launch_env.h"
#include "rlx/transport/transport.h"

namespace rlx::mpi {

// True when this build contains the MPI transport.
bool is_built();

// Joins MPI_COMM_WORLD. Throws CollectiveError (backend_unavailable) when the
// transport is not built or MPI cannot start.
std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env);

}  // namespace rlx::mpi
