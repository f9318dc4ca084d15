// The stand-ins for backends a build leaves out (mpi/no_mpi.cc,
// verbs/no_verbs.cc, rlx/transport/rendezvous/pmix_client_none.cc), compiled into
// every build so they cannot rot: each says the backend was not built and
// which packages bring it.
#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "rlx/backends/mpi/mpi.h"
#include "rlx/backends/verbs/verbs.h"
#include "rlx/transport/rendezvous/pmix_client.h"

namespace rlx {
namespace {

using Create = std::shared_ptr<Transport> (*)(const launch_env::LaunchEnv&);

struct Stub {
  const char* name;
  std::function<bool()> is_built;
  std::function<std::shared_ptr<Transport>(const launch_env::LaunchEnv&)> create;
  const char* says;
  const char* packages;
};

TEST(NoBackends, EachStubSaysTheBackendWasNotBuiltAndHowToBuildIt) {
  const Stub stubs[] = {
      {"mpi", mpi::is_built, mpi::create, "built without the Open MPI transport", "libopenmpi-dev"},
      {"verbs", verbs::is_built, static_cast<Create>(verbs::create),
       "built without the RDMA verbs transport", "librdmacm-dev"},
      {"pmix", pmix::is_built,
       [](const launch_env::LaunchEnv&) -> std::shared_ptr<Transport> {
         pmix::Client::connect();
         return nullptr;
       },
       "a PMIx server started this process, but rlx was built without PMIx", "libpmix-dev"},
  };
  for (const Stub& stub : stubs) {
    EXPECT_FALSE(stub.is_built()) << stub.name;
    try {
      stub.create(launch_env::LaunchEnv{});
      ADD_FAILURE() << stub.name << ": created a transport";
    } catch (const CollectiveError& error) {
      EXPECT_EQ(error.kind(), ErrorKind::backend_unavailable) << stub.name;
      EXPECT_NE(std::string(error.what()).find(stub.says), std::string::npos) << error.what();
      EXPECT_NE(std::string(error.what()).find(stub.packages), std::string::npos) << error.what();
    }
  }
}

}  // namespace
}  // namespace rlx
