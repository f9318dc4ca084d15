// Which transport rlx::init starts, decided from the request, the launch
// environment and what this build contains. Kept free of side effects so the
// rules can be tested directly.
#pragma once

#include <string_view>

#include "transport/launch_env.h"

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
//  2. A named backend is used when its launcher started the process; with no
//     launcher, tcp and verbs fall back to the group of one (the world really
//     is one process) unless `strict`; mpi needs mpirun.
//  3. "any": rlxrun's environment means tcp; mpirun's means mpi; neither means
//     the group of one (an error when `strict`).
// Throws CollectiveError (invalid_argument, backend_unavailable) saying why.
BackendKind choose_backend(const launch_env::LaunchEnv& env, std::string_view requested,
                           bool strict, BuiltBackends built);

}  // namespace rlx
