// The stand-in for a build without libibverbs/librdmacm, compiled into every
// build so it cannot rot: it says the backend was not built and how to get it.
#include <gtest/gtest.h>

#include "transport/verbs/verbs.h"

namespace rlx::verbs {
namespace {

TEST(NoVerbs, SaysTheBackendWasNotBuiltAndHowToBuildIt) {
  EXPECT_FALSE(is_built());
  try {
    create(launch_env::LaunchEnv{});
    FAIL() << "created a transport";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::backend_unavailable);
    EXPECT_NE(std::string(error.what()).find("built without the RDMA verbs transport"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("librdmacm-dev"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace rlx::verbs
