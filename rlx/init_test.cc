// rlx::init reads the real process environment and keeps one group per
// process, so each case runs in a child process (a GoogleTest death test).
#include "rlx/init.h"

#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

void clear_launch_environment() {
  for (const char* name : {"RLX_RANK", "RLX_WORLD_SIZE", "RLX_BACKEND", "RLX_TIMEOUT_S",
                           "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}) {
    unsetenv(name);
  }
}

// Runs init in the child and exits 0 when `check` holds; prints the error otherwise.
template <class Check>
[[noreturn]] void init_and_exit(const char* backend, bool strict, Check check) {
  try {
    auto group = init(backend, strict);
    std::exit(check(*group) ? 0 : 3);
  } catch (const Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    std::exit(2);
  }
}

class InitTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(InitTest, NoLauncherGivesAWorkingGroupOfOne) {
  EXPECT_EXIT(
      {
        clear_launch_environment();
        init_and_exit("any", false, [](Transport& group) {
          std::vector<int> v{1, 2, 3};
          group.all_sum(std::span(v));
          group.send_bytes(0, 1, std::vector<std::byte>(2));
          return group.world_size() == 1 && group.rank() == 0 && v[2] == 3 &&
                 group.recv_bytes(0, 1).size() == 2 && init().get() == &group;
        });
      },
      ::testing::ExitedWithCode(0), "");
}

// The handle: rank, size and split on it, every Transport call through ->,
// and a shared_ptr<Transport> wherever one is taken.
TEST_F(InitTest, TheGroupHandleSplitsAndForwardsToItsTransport) {
  EXPECT_EXIT(
      {
        clear_launch_environment();
        const Group world = init();
        const Group same = world.split(0);
        const Group none = world.split(kNoColor);
        std::vector<float> values{1.5f};
        same->all_sum(std::span(values));
        const std::shared_ptr<Transport> shared = world;
        const bool ok = world.rank() == 0 && world.size() == 1 && world.backend() == "singleton" &&
                        same && same.size() == 1 && same != world && !none && values[0] == 1.5f &&
                        shared.get() == world.get() && init() == world;
        std::exit(ok ? 0 : 3);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(InitTest, StrictWithoutLauncherFailsNamingWhatItLookedFor) {
  EXPECT_EXIT(
      {
        clear_launch_environment();
        init_and_exit("any", true, [](Transport&) { return true; });
      },
      ::testing::ExitedWithCode(2), "backend unavailable.*RLX_WORLD_SIZE");
}

TEST_F(InitTest, MalformedEnvironmentIsAClearError) {
  EXPECT_EXIT(
      {
        clear_launch_environment();
        setenv("RLX_RANK", "one", 1);
        setenv("RLX_WORLD_SIZE", "2", 1);
        init_and_exit("any", false, [](Transport&) { return true; });
      },
      ::testing::ExitedWithCode(2), "RLX_RANK='one' is not valid");
}

TEST_F(InitTest, MpiOutsideMpirunSaysWhy) {
  EXPECT_EXIT(
      {
        clear_launch_environment();
        setenv("RLX_BACKEND", "mpi", 1);
        init_and_exit("any", false, [](Transport&) { return true; });
      },
      ::testing::ExitedWithCode(2), is_mpi_built() ? "not started by mpirun" : "built without");
}

TEST_F(InitTest, TimeoutFromTheEnvironmentReachesTheGroup) {
  EXPECT_EXIT(
      {
        clear_launch_environment();
        setenv("RLX_TIMEOUT_S", "0.2", 1);
        init_and_exit("any", false, [](Transport& group) {
          return group.timeout() == std::chrono::milliseconds(200);
        });
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(InitTest, AskingForAnotherBackendLaterIsAnError) {
  EXPECT_EXIT(
      {
        clear_launch_environment();
        init();
        init_and_exit("mpi", false, [](Transport&) { return true; });
      },
      ::testing::ExitedWithCode(2), "already initialised");
}

}  // namespace
}  // namespace rlx
