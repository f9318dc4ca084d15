// MPI as a process-wide resource: starting it, the thread level rlx needs,
// and finalising it exactly once.
//
// Thread level: rlx needs MPI_THREAD_MULTIPLE, because collectives may run on
// a worker thread (async_eval) while the main thread sends and receives, and
// because the watchdog calls MPI_Abort from its own thread. When rlx starts
// MPI it asks for MULTIPLE; when the program started MPI itself, rlx uses it
// as it is if the level is MULTIPLE and otherwise refuses with an error that
// says how to start MPI instead (serialising behind a lock would not be
// enough: the program's own MPI calls on other threads would not take it).
//
// Finalising: only when rlx started MPI, from an atexit handler, and only if
// nobody finalised it already. Whoever finalises, the transports still alive
// are released first (pending sends drained, communicators freed) through a
// delete callback on MPI_COMM_SELF, which MPI runs at the start of
// MPI_Finalize while every MPI call still works.
#pragma once

#include <mpi.h>

#include "rlx/transport/errors.h"
#include "rlx/transport/transport.h"

namespace rlx::mpi {

// Something holding MPI resources that must go before MPI_Finalize.
class Releasable {
 public:
  // Frees the MPI resources; called at most once per registration, without
  // the runtime's lock held.
  virtual void release_for_finalize() = 0;

 protected:
  ~Releasable() = default;
};

// Starts MPI if the program has not, checks the thread level, and installs
// the finalize hooks. Throws CollectiveError (backend_unavailable) naming
// `where`.
void ensure_started(const ErrorSite& where);

// Registers `live` to be released when MPI is finalised; unregister() before
// it is destroyed. unregister() returns false when the finalize hook has
// taken it already (and released it, or is releasing it now).
void register_live(Releasable* live);
bool unregister(Releasable* live);

// A user-defined, commutative MPI operation that computes `op` over `dtype`
// (f16, bf16 or u8) with rlx's own kernel, reduce_into: 16-bit floats widen
// to float and round back, u8 wraps. Valid after ensure_started.
MPI_Op kernel_op(Dtype dtype, ReduceOp op);

// The CollectiveError for an MPI return code: MPI's own error string, the
// call that failed and the site; the kind follows MPI's error class.
CollectiveError mpi_error(int code, ErrorSite site, std::string_view call);

}  // namespace rlx::mpi
