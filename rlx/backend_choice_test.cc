#include "rlx/backend_choice.h"

#include <gtest/gtest.h>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

using launch_env::LaunchEnv;

LaunchEnv rlxrun_env(int world_size, std::string backend = "") {
  LaunchEnv env;
  env.rank = 0;
  env.world_size = world_size;
  env.backend = std::move(backend);
  return env;
}

LaunchEnv mpirun_env(int world_size) {
  LaunchEnv env;
  env.mpi_rank = 0;
  env.mpi_world_size = world_size;
  return env;
}

// A process a PMIx server started (srun --mpi=pmix; mpirun too when `mpirun_size`).
LaunchEnv pmix_env(int mpirun_size = 0) {
  LaunchEnv env = mpirun_size > 0 ? mpirun_env(mpirun_size) : LaunchEnv{};
  env.group_source = launch_env::GroupSource::pmix;
  env.rank = 1;
  return env;
}

void expect_error(ErrorKind kind, const std::string& fragment, auto&& call) {
  try {
    call();
    FAIL() << "expected an error containing " << fragment;
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), kind) << error.what();
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

constexpr BuiltBackends kAll{.mpi = true, .verbs = true};
constexpr BuiltBackends kNone{};

TEST(BackendChoice, NoLauncherGivesTheGroupOfOne) {
  EXPECT_EQ(choose_backend({}, "any", false, kAll), BackendKind::singleton);
  EXPECT_EQ(choose_backend({}, "tcp", false, kAll), BackendKind::singleton);
  EXPECT_EQ(choose_backend(rlxrun_env(1), "any", true, kAll), BackendKind::singleton);
  EXPECT_EQ(choose_backend(mpirun_env(1), "any", false, kAll), BackendKind::singleton);
}

TEST(BackendChoice, StrictWithoutLauncherSaysWhatWasLookedFor) {
  expect_error(ErrorKind::backend_unavailable, "OMPI_COMM_WORLD_SIZE",
               [] { choose_backend({}, "any", true, kAll); });
  expect_error(ErrorKind::backend_unavailable, "RLX_WORLD_SIZE",
               [] { choose_backend({}, "tcp", true, kAll); });
}

TEST(BackendChoice, LaunchersPickTheirBackend) {
  EXPECT_EQ(choose_backend(rlxrun_env(4), "any", false, kAll), BackendKind::tcp);
  EXPECT_EQ(choose_backend(rlxrun_env(4, "verbs"), "any", false, kAll), BackendKind::verbs);
  EXPECT_EQ(choose_backend(mpirun_env(4), "any", false, kAll), BackendKind::mpi);
  EXPECT_EQ(choose_backend(mpirun_env(4), "mpi", true, kAll), BackendKind::mpi);
}

TEST(BackendChoice, ExplainsWhyABackendCannotStart) {
  expect_error(ErrorKind::backend_unavailable, "built without",
               [] { choose_backend(mpirun_env(2), "mpi", false, kNone); });
  expect_error(ErrorKind::backend_unavailable, "not started by mpirun",
               [] { choose_backend({}, "mpi", false, kAll); });
  expect_error(ErrorKind::backend_unavailable, "built without",
               [] { choose_backend(rlxrun_env(2), "verbs", false, kNone); });
  // mpirun with several processes but no MPI in this build must not silently
  // give every process a world of its own.
  expect_error(ErrorKind::backend_unavailable, "built without",
               [] { choose_backend(mpirun_env(2), "any", false, kNone); });
}

LaunchEnv with_backend(LaunchEnv env, std::string backend) {
  env.backend = std::move(backend);
  return env;
}

LaunchEnv foreign_env(std::string variable) {
  LaunchEnv env;
  env.foreign_launcher = std::move(variable);
  return env;
}

TEST(BackendChoice, ABackendNamedByRlxBackendWithoutItsLauncherIsAnError) {
  expect_error(ErrorKind::backend_unavailable,
               "RLX_BACKEND=tcp: the tcp backend needs a rank from rlxrun",
               [] { choose_backend(with_backend({}, "tcp"), "any", false, kAll); });
  expect_error(ErrorKind::backend_unavailable, "RLX_BACKEND=verbs",
               [] { choose_backend(with_backend({}, "verbs"), "any", false, kAll); });
  // mpirun -np 3 -x RLX_BACKEND=tcp: three processes, none of them a group of one.
  expect_error(ErrorKind::backend_unavailable, "OMPI_COMM_WORLD_SIZE=3",
               [] { choose_backend(with_backend(mpirun_env(3), "tcp"), "any", false, kAll); });
  expect_error(ErrorKind::backend_unavailable, "RLX_BACKEND=mpi under mpirun",
               [] { choose_backend(with_backend(mpirun_env(3), "tcp"), "any", false, kAll); });
  // rlxrun -n 1 is a real world of one.
  EXPECT_EQ(choose_backend(rlxrun_env(1, "tcp"), "any", false, kAll), BackendKind::singleton);
}

TEST(BackendChoice, AnotherLaunchersSeveralProcessesNeverBecomeGroupsOfOne) {
  for (const char* variable : {"SLURM_STEP_NUM_TASKS=4", "PMI_SIZE=2"}) {
    expect_error(ErrorKind::backend_unavailable, variable,
                 [&] { choose_backend(foreign_env(variable), "any", false, kAll); });
    expect_error(ErrorKind::backend_unavailable, "RLX_BACKEND=singleton",
                 [&] { choose_backend(foreign_env(variable), "tcp", false, kAll); });
  }
  // Under mpirun, a program asking for tcp in code gets no silent group of one either.
  expect_error(ErrorKind::backend_unavailable, "OMPI_COMM_WORLD_SIZE=2",
               [] { choose_backend(mpirun_env(2), "tcp", false, kAll); });
}

TEST(BackendChoice, SingletonIsTheWayToAskForAGroupOfOne) {
  EXPECT_EQ(choose_backend(foreign_env("SLURM_STEP_NUM_TASKS=4"), "singleton", false, kAll),
            BackendKind::singleton);
  EXPECT_EQ(choose_backend(with_backend(mpirun_env(3), "singleton"), "any", true, kAll),
            BackendKind::singleton);
  EXPECT_EQ(choose_backend({}, "singleton", true, kNone), BackendKind::singleton);
}

TEST(BackendChoice, ProgramAndEnvironmentMustAgree) {
  expect_error(ErrorKind::invalid_argument, "RLX_BACKEND=mpi",
               [] { choose_backend(rlxrun_env(2, "mpi"), "tcp", false, kAll); });
  expect_error(ErrorKind::invalid_argument, "unknown backend 'nccl'",
               [] { choose_backend({}, "nccl", false, kAll); });
  EXPECT_EQ(choose_backend(rlxrun_env(2, "any"), "tcp", false, kAll), BackendKind::tcp);
}

// A PMIx server's process joins with tcp (its size asked by init); under
// mpirun, only when a backend other than MPI is asked for.
TEST(BackendChoice, APmixServersProcessJoinsWithTcpAndMpirunStaysMpi) {
  EXPECT_EQ(choose_backend(pmix_env(), "any", true, kAll), BackendKind::tcp);
  EXPECT_EQ(choose_backend(pmix_env(), "verbs", false, kAll), BackendKind::verbs);
  EXPECT_EQ(choose_backend(pmix_env(3), "any", false, kAll), BackendKind::mpi);
  EXPECT_EQ(choose_backend(pmix_env(3), "tcp", false, kAll), BackendKind::tcp);
}

}  // namespace
}  // namespace rlx
