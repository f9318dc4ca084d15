#include "rlx/transport/launch_env.h"

#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "rlx/transport/errors.h"

namespace rlx::launch_env {
namespace {

LaunchEnv parse_map(const std::map<std::string, std::string>& vars) {
  return parse([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// Expects a parse error that quotes `variable` and `fragment`.
void expect_rejected(const std::map<std::string, std::string>& vars, const std::string& variable,
                     const std::string& fragment) {
  try {
    parse_map(vars);
    FAIL() << "accepted " << variable;
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
    const std::string text = error.what();
    EXPECT_NE(text.find(variable), std::string::npos) << text;
    EXPECT_NE(text.find(fragment), std::string::npos) << text;
  }
}

TEST(LaunchEnv, EmptyEnvironmentMeansNoLauncherAndDefaults) {
  const LaunchEnv env = parse_map({});
  EXPECT_FALSE(env.launched_by_rlxrun());
  EXPECT_FALSE(env.launched_by_mpirun());
  EXPECT_EQ(env.timeout, kDefaultTimeout);
  EXPECT_EQ(env.unexpected_bytes_cap, kDefaultUnexpectedCap);
  EXPECT_TRUE(env.backend.empty());
}

TEST(LaunchEnv, ReadsTheFlightRecordersSettings) {
  const LaunchEnv env =
      parse_map({{"RLX_RECORD_CALLS", "64"}, {"RLX_DUMP_DIR", "d"}, {"RLX_TRACE", "t"}});
  EXPECT_EQ(env.record.entries, 64u);
  EXPECT_EQ(env.record.dump_dir, "d");
  EXPECT_EQ(env.record.trace_dir, "t");
  expect_rejected({{"RLX_RECORD_CALLS", "10001"}}, "RLX_RECORD_CALLS", "10000");
  // The trace is written from the record.
  expect_rejected({{"RLX_RECORD_CALLS", "0"}, {"RLX_TRACE", "t"}}, "RLX_TRACE", "RLX_RECORD_CALLS");
}

TEST(LaunchEnv, ReadsWhatRlxrunSets) {
  const LaunchEnv env = parse_map({{"RLX_RANK", "2"},
                                   {"RLX_WORLD_SIZE", "4"},
                                   {"RLX_LOCAL_RANK", "0"},
                                   {"RLX_COORDINATOR", "[::1]:4000"},
                                   {"RLX_JOB_TOKEN", "secret"},
                                   {"RLX_BACKEND", "tcp"},
                                   {"RLX_TIMEOUT_S", "0.25"},
                                   {"RLX_UNEXPECTED_BYTES", "1048576"},
                                   {"RLX_TCP_CONGESTION", "cubic"}});
  ASSERT_TRUE(env.launched_by_rlxrun());
  EXPECT_EQ(*env.rank, 2);
  EXPECT_EQ(*env.world_size, 4);
  EXPECT_EQ(*env.local_rank, 0);
  EXPECT_EQ(env.coordinator, "[::1]:4000");
  EXPECT_EQ(env.job_token, "secret");
  EXPECT_EQ(env.backend, "tcp");
  EXPECT_EQ(env.timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(env.unexpected_bytes_cap, 1u << 20);
  EXPECT_EQ(env.tcp_congestion, "cubic");
}

TEST(LaunchEnv, ReadsWhatMpirunSets) {
  const LaunchEnv env = parse_map({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"}});
  EXPECT_TRUE(env.launched_by_mpirun());
  EXPECT_EQ(*env.mpi_world_size, 3);
}

TEST(LaunchEnv, NotesAnotherLauncherThatStartedSeveralProcesses) {
  EXPECT_EQ(parse_map({{"SLURM_STEP_NUM_TASKS", "4"}}).foreign_launcher, "SLURM_STEP_NUM_TASKS=4");
  EXPECT_EQ(parse_map({{"PMI_SIZE", "2"}}).foreign_launcher, "PMI_SIZE=2");
  // One process, or a value that is not a count, is no evidence (and no error: not ours).
  EXPECT_EQ(parse_map({{"SLURM_STEP_NUM_TASKS", "1"}}).foreign_launcher, "");
  EXPECT_EQ(parse_map({{"PMI_SIZE", "earth"}}).foreign_launcher, "");
  EXPECT_EQ(parse_map({{"RLX_BACKEND", "singleton"}}).backend, "singleton");
}

TEST(LaunchEnv, ReadsATorchrunStyleEnvironmentRankZeroHostingTheRendezvous) {
  const std::map<std::string, std::string> vars = {{"RANK", "0"},
                                                   {"WORLD_SIZE", "4"},
                                                   {"MASTER_ADDR", "node1"},
                                                   {"MASTER_PORT", "29500"},
                                                   {"LOCAL_RANK", "0"},
                                                   {"LOCAL_WORLD_SIZE", "2"}};
  const LaunchEnv env = parse_map(vars);
  EXPECT_EQ(env.group_source, GroupSource::torchrun);
  ASSERT_TRUE(env.launched_by_rlxrun());
  EXPECT_EQ(*env.rank, 0);
  EXPECT_EQ(*env.world_size, 4);
  EXPECT_EQ(*env.local_size, 2);
  EXPECT_EQ(env.coordinator, "node1:29500");
  EXPECT_TRUE(env.hosts_rendezvous);
  EXPECT_FALSE(env.job_token.empty());  // derived: every rank derives the same
  auto other = vars;
  other["RANK"] = "3";
  const LaunchEnv rank3 = parse_map(other);
  EXPECT_FALSE(rank3.hosts_rendezvous);
  EXPECT_EQ(rank3.job_token, env.job_token);
  other["RLX_JOB_TOKEN"] = "from the user";
  EXPECT_EQ(parse_map(other).job_token, "from the user");
  other["MASTER_ADDR"] = "fe80::1";
  EXPECT_EQ(parse_map(other).coordinator, "[fe80::1]:29500");
}

TEST(LaunchEnv, ReadsMlxLaunchsEnvironment) {
  const LaunchEnv env = parse_map({{"MLX_RANK", "1"}, {"MLX_HOSTFILE", "/tmp/hosts.json"}});
  EXPECT_EQ(env.group_source, GroupSource::mlx);
  EXPECT_EQ(*env.rank, 1);
  EXPECT_FALSE(env.world_size);  // the table's length, which rlx::init reads
  EXPECT_EQ(env.hostfile, "/tmp/hosts.json");
  const LaunchEnv sized =
      parse_map({{"MLX_RANK", "1"}, {"MLX_HOSTFILE", "h.json"}, {"MLX_WORLD_SIZE", "2"}});
  EXPECT_EQ(*sized.world_size, 2);
}

// RLX_* first, then MLX_*, then torchrun's: the first set found is used.
TEST(LaunchEnv, RlxVariablesWinOverMlxOverTorchrun) {
  const std::map<std::string, std::string> torch = {
      {"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}};
  auto mlx = torch;
  mlx.insert({{"MLX_RANK", "0"}, {"MLX_HOSTFILE", "h.json"}});
  EXPECT_EQ(parse_map(mlx).group_source, GroupSource::mlx);
  auto rlx = mlx;
  rlx.insert({{"RLX_RANK", "0"}, {"RLX_WORLD_SIZE", "3"}});
  const LaunchEnv env = parse_map(rlx);
  EXPECT_EQ(env.group_source, GroupSource::rlx);
  EXPECT_EQ(*env.world_size, 3);
}

// Each launcher's variables place a rank; the settings every rank shares do not.
TEST(LaunchEnv, PerRankVariablesAreEveryLaunchersRankSizeAndMeetingPoint) {
  for (const char* name :
       {"RLX_RANK", "RLX_WORLD_SIZE", "RLX_LOCAL_RANK", "RLX_COORDINATOR", "RLX_JOB_TOKEN",
        "RLX_HOSTFILE", "RANK", "WORLD_SIZE", "MASTER_PORT", "MLX_RANK", "MLX_HOSTFILE",
        "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    EXPECT_TRUE(is_per_rank_variable(name)) << name;
  }
  for (const char* name : {"RLX_TIMEOUT_S", "RLX_TCP_LANES", "RLX_BACKEND", "RLX_RANKS", "PATH"}) {
    EXPECT_FALSE(is_per_rank_variable(name)) << name;
  }
}

TEST(LaunchEnv, APmixServersProcessHasItsRankAndAsksTheServerForTheSize) {
  const LaunchEnv env = parse_map({{"PMIX_NAMESPACE", "slurm.pmix.7.0"}, {"PMIX_RANK", "2"}});
  EXPECT_EQ(env.group_source, GroupSource::pmix);
  EXPECT_EQ(*env.rank, 2);
  EXPECT_FALSE(env.world_size);
  const LaunchEnv torch = parse_map({{"PMIX_NAMESPACE", "n"},
                                     {"PMIX_RANK", "2"},
                                     {"RANK", "0"},
                                     {"WORLD_SIZE", "2"},
                                     {"MASTER_ADDR", "a"},
                                     {"MASTER_PORT", "5"}});
  EXPECT_EQ(torch.group_source, GroupSource::torchrun);  // torchrun's variables first
}

TEST(LaunchEnv, APartialLauncherEnvironmentIsAnErrorNamingWhatIsMissing) {
  expect_rejected({{"WORLD_SIZE", "8"}, {"RANK", "3"}}, "MASTER_ADDR, MASTER_PORT", "torchrun");
  expect_rejected({{"MASTER_ADDR", "a"}}, "RANK, WORLD_SIZE", "partial torchrun");
  expect_rejected({{"MLX_RANK", "0"}}, "MLX_HOSTFILE", "partial mlx.launch");
  expect_rejected({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}},
                  "RANK", "below WORLD_SIZE=4");
  expect_rejected({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "0"}},
                  "MASTER_PORT", "port number");
}

TEST(LaunchEnv, RejectsMalformedValuesNamingThem) {
  expect_rejected({{"RLX_RANK", "abc"}, {"RLX_WORLD_SIZE", "2"}}, "RLX_RANK", "'abc'");
  expect_rejected({{"RLX_RANK", "1"}, {"RLX_WORLD_SIZE", "2x"}}, "RLX_WORLD_SIZE", "'2x'");
  expect_rejected({{"RLX_RANK", "-1"}, {"RLX_WORLD_SIZE", "2"}}, "RLX_RANK", "'-1'");
  expect_rejected({{"RLX_RANK", "2"}, {"RLX_WORLD_SIZE", "2"}}, "RLX_RANK", "below");
  expect_rejected({{"RLX_RANK", "0"}, {"RLX_WORLD_SIZE", "0"}}, "RLX_WORLD_SIZE", "'0'");
  expect_rejected({{"RLX_RANK", "0"}}, "RLX_RANK", "RLX_WORLD_SIZE");
  expect_rejected({{"RLX_WORLD_SIZE", "2"}}, "RLX_WORLD_SIZE", "RLX_RANK");
  expect_rejected({{"RLX_RANK", " 1"}, {"RLX_WORLD_SIZE", "2"}}, "RLX_RANK", "' 1'");
  expect_rejected({{"RLX_BACKEND", "nccl"}}, "RLX_BACKEND", "tcp, mpi, verbs, singleton, any");
  expect_rejected({{"RLX_TIMEOUT_S", "0"}}, "RLX_TIMEOUT_S", "above 0");
  expect_rejected({{"RLX_TIMEOUT_S", "nan"}}, "RLX_TIMEOUT_S", "'nan'");
  expect_rejected({{"RLX_TIMEOUT_S", "10s"}}, "RLX_TIMEOUT_S", "'10s'");
  expect_rejected({{"RLX_UNEXPECTED_BYTES", "1e9"}}, "RLX_UNEXPECTED_BYTES", "'1e9'");
  expect_rejected({{"RLX_TCP_CONGESTION", "cubic; rm"}}, "RLX_TCP_CONGESTION", "algorithm's name");
  expect_rejected({{"RLX_TCP_CONGESTION", "a_name_far_too_long"}}, "RLX_TCP_CONGESTION",
                  "'a_name_far_too_long'");
  expect_rejected({{"OMPI_COMM_WORLD_SIZE", "many"}}, "OMPI_COMM_WORLD_SIZE", "'many'");
  expect_rejected({{"RLX_RANK", "99999999999999999999"}, {"RLX_WORLD_SIZE", "2"}}, "RLX_RANK",
                  "99999999999999999999");
}

TEST(LaunchEnv, RanksShareCoresOnlyWhenTheyOutnumberTheHardwareThreads) {
  const int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads == 0) GTEST_SKIP() << "this host does not say how many hardware threads it has";
  EXPECT_FALSE(ranks_share_cores(1));
  EXPECT_FALSE(ranks_share_cores(threads));
  EXPECT_TRUE(ranks_share_cores(threads + 1));
  EXPECT_TRUE(ranks_share_cores(4 * threads));
}

TEST(LaunchEnv, AlgorithmLogAndVerbsSettingsAreParsedWithTheRest) {
  const LaunchEnv defaults = parse_map({});
  EXPECT_EQ(defaults.all_reduce_algorithm, AllReduceAlgorithm::by_size);
  EXPECT_EQ(defaults.log_level, LogLevel::warn);
  EXPECT_TRUE(defaults.cost_model_file.empty());
  EXPECT_EQ(defaults.verbs.port, 0);
  EXPECT_FALSE(defaults.verbs.caller_spin.has_value());

  const LaunchEnv env = parse_map({{"RLX_ALL_REDUCE_ALGORITHM", "ring"},
                                   {"RLX_COST_MODEL", "/tmp/fitted"},
                                   {"RLX_LOG", "debug"},
                                   {"RLX_IB_DEVICE", "mlx5_1"},
                                   {"RLX_IB_PORT", "2"},
                                   {"RLX_IB_GID_INDEX", "3"},
                                   {"RLX_VERBS_SPIN_US", "0"}});
  EXPECT_EQ(env.all_reduce_algorithm, AllReduceAlgorithm::ring);
  EXPECT_EQ(env.cost_model_file, "/tmp/fitted");
  EXPECT_EQ(env.log_level, LogLevel::debug);
  EXPECT_EQ(env.verbs.device, "mlx5_1");
  EXPECT_EQ(env.verbs.port, 2);
  EXPECT_EQ(env.verbs.gid_index, 3);
  EXPECT_EQ(env.verbs.caller_spin, std::chrono::microseconds(0));
  EXPECT_EQ(parse_map({{"RLX_ALL_REDUCE_ALGORITHM", "auto"}}).all_reduce_algorithm,
            AllReduceAlgorithm::by_size);
  EXPECT_EQ(parse_map({{"RLX_LOG", "info"}}).log_level, LogLevel::info);
}

TEST(LaunchEnv, BadAlgorithmLogAndVerbsSettingsAreRefusedByName) {
  expect_rejected({{"RLX_ALL_REDUCE_ALGORITHM", "tree"}}, "RLX_ALL_REDUCE_ALGORITHM",
                  "ring or recursive_doubling");
  expect_rejected({{"RLX_LOG", "verbose"}}, "RLX_LOG", "debug, info or warn");
  expect_rejected({{"RLX_IB_PORT", "0"}}, "RLX_IB_PORT", "from 1 to 255");
  expect_rejected({{"RLX_IB_GID_INDEX", "x"}}, "RLX_IB_GID_INDEX", "GID index");
  expect_rejected({{"RLX_VERBS_SPIN_US", "-1"}}, "RLX_VERBS_SPIN_US", "microseconds");
}

}  // namespace
}  // namespace rlx::launch_env
