// Which transport rlx::init starts, decided from the request, the launch
// environment and what this build contains. Kept free of side effects so the
// rules can be tested directly.
#pragma once

#include <string_view>

#include "rlx/transport/launch_env.h"

namespace rlx {

enum class BackendKind { singleton, tcp, mpi, verbs };

std::string_view name_of(BackendKind kind);

struct BuiltBackends {
  bool mpi = false;
  bool verbs = false;
};

// The rules, in order:
//  1. `requested` (the argument of init) and RLX_BACKEND must agree when both
//     name a backend; "any" (or unset) defers to the other.
//  2. "singleton" is a group of one, always: the way to ask for one.
//  3. A named backend is used when its launcher started the process with
//     more than one rank (rlxrun for tcp and verbs, mpirun for mpi); rlxrun
//     -n 1 gives the group of one.
//  4. Without its launcher, a backend named by RLX_BACKEND is an error (the
//     person who started the job asked for it); one named only by the
//     program falls back to the group of one unless `strict`, as "any" does.
//  5. "any": rlxrun's environment (or mlx.launch's, torchrun's) means tcp;
//     mpirun's (N > 1) means mpi; another PMIx server's (srun --mpi=pmix)
//     means tcp, its size asked by init; none means the group of one (an
//     error when `strict`). A named tcp or verbs also joins through PMIx.
//  6. Whatever was asked, a group of one is an error when another launcher
//     started this process as one of several (launch_env's foreign_launcher,
//     or mpirun when the mpi backend is not what runs): the processes would
//     each run alone and silently compute unrelated results.
// Throws CollectiveError (invalid_argument, backend_unavailable) saying why.
BackendKind choose_backend(const launch_env::LaunchEnv& env, std::string_view requested,
                           bool strict, BuiltBackends built);

}  // namespace rlx
