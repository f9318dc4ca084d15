#include "rlx/backends/mpi/failure.h"

#include <exception>
#include <string>

namespace rlx::mpi {

CollectiveError record_failure(FailureLatch& latch, CollectiveError error) {
  latch.trip(std::make_exception_ptr(error));
  return error;
}

void throw_if_unusable(const FailureLatch& latch, const ErrorSite& where) {
  if (!latch.tripped()) [[likely]]
    return;
  try {
    latch.rethrow_if_tripped();
  } catch (const CollectiveError& first) {
    throw CollectiveError(
        first.kind(), where,
        std::string("the transport is unusable after an earlier failure: ") + first.what());
  }
}

}  // namespace rlx::mpi
