// The MPI transport's first fatal error, in the FailureLatch every backend
// uses. A failure that leaves MPI state behind (a receive that matched but
// never finished, a failed send or collective) makes every later call fail.
#pragma once

#include "rlx/transport/errors.h"
#include "rlx/transport/failure_latch.h"

namespace rlx::mpi {

// Records `error` in `latch` unless an earlier failure is recorded, and
// returns it: `throw record_failure(latch, error)`.
CollectiveError record_failure(FailureLatch& latch, CollectiveError error);

// Throws, at `where`, when an earlier failure made the transport unusable,
// quoting that failure.
void throw_if_unusable(const FailureLatch& latch, const ErrorSite& where);

}  // namespace rlx::mpi
