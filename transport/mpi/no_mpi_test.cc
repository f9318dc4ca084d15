// The stand-in for a build without Open MPI, compiled into every build so it
// cannot rot: it says the backend was not built and how to get it.
#include <gtest/gtest.h>

#include "transport/mpi/mpi.h"

namespace rlx::mpi {
namespace {

TEST(NoMpi, SaysTheBackendWasNotBuiltAndHowToBuildIt) {
  EXPECT_FALSE(is_built());
  try {
    create(launch_env::LaunchEnv{});
    FAIL() << "created a transport";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::backend_unavailable);
    EXPECT_NE(std::string(error.what()).find("built without the Open MPI transport"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("libopenmpi-dev"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace rlx::mpi
