#include "rlx/transport/errors.h"
#include "rlx/transport/rendezvous/pmix_client.h"

namespace rlx::pmix {

bool is_built() { return false; }

std::shared_ptr<Client> Client::connect() {
  throw CollectiveError(
      ErrorKind::backend_unavailable, {.operation = "join the PMIx job"},
      "a PMIx server started this process, but rlx was built without PMIx",
      "install libpmix-dev and reconfigure rlx with -DRLX_WITH_PMIX=AUTO (or, for "
      "a project that found rlx with find_package, that project: its pmix "
      "component was not found), or start the program with rlxrun");
}

}  // namespace rlx::pmix
