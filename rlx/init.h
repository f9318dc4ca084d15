// Joining the process group.
#pragma once

#include <memory>
#include <string_view>

#include "rlx/group.h"

namespace rlx {

// Returns this process's group, starting the transport on the first call.
//
// `backend` is "any" (the default), "tcp", "mpi", "verbs" or "singleton";
// RLX_BACKEND chooses when the program says "any". With no launcher, the
// result is a group of one whose collectives are the identity, unless
// `strict`, which makes that an error naming what was looked for. A group of
// one is never chosen silently for a process that another launcher started as
// one of several, nor when RLX_BACKEND names a backend whose launcher is
// missing: those are errors ("singleton" asks for the group of one on
// purpose). rlx/backend_choice.h has the rules. Later calls return the same group when
// they ask for the same backend, and throw when they ask for another.
// Errors are CollectiveError (invalid_argument, backend_unavailable, and
// whatever the transport's connection phase reports).
Group init(std::string_view backend = "any", bool strict = false);

// Drops rlx's own hold on the process group (init's and the array ops'
// default group): the group closes, its peers told, when the program's last
// Group handle on it goes (at once when it holds none). Idempotent; init
// fails with invalid_argument after it, as MPI_Init after MPI_Finalize.
void finalize();

// True when rlx was built with the Open MPI (resp. verbs) transport.
bool is_mpi_built();
bool is_verbs_built();
// The same by name, for the C API and the Python module: true for tcp and
// singleton, is_mpi_built() for mpi, ...; throws rlx::Error naming the
// backends for any other name.
bool is_backend_built(std::string_view name);

}  // namespace rlx
