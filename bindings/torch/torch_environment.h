// torch's env:// variables for a process that a launcher rlx joins but torch
// does not read (mpirun, srun): what deepspeed.init_distributed does with
// MPI, done over rlx's own group of the job.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "rlx/group.h"

namespace rlx::torch_backend {

// Joins rlx's group of the job (rlx::init: RLX_BACKEND chooses) and returns
// RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (ranks with this host's
// name) and MASTER_ADDR, MASTER_PORT: rank 0's address as the others reach
// it (loopback when every rank is on its host) and a port free there.
std::map<std::string, std::string> torch_environment();

// The group torch_environment() joined, for the first world-sized process
// group that asks for it (none before, or after it was taken).
std::optional<Group> take_discovered_world(int rank, int size);

}  // namespace rlx::torch_backend
