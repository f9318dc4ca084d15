// Programs started by other launchers join one group: real processes with
// the environment torchrun sets (rank 0 hosting the rendezvous on
// MASTER_PORT, and only there), the one mlx.launch sets (MLX_RANK and a
// static MLX_HOSTFILE), and rlxrun reading mlx.launch's object-form hostfile
// (its "ips" where ranks listen). Partial environments are errors, never a
// group of one; ranks that never start or are refused are named.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/local_net.h"
#include "tests/support/subprocess.h"

namespace rlx::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Starts one process per environment and expects every one to print that
// it is rank r of n with the right all_sum.
void expect_one_group(const std::vector<std::vector<std::string>>& environments) {
  const int n = static_cast<int>(environments.size());
  std::vector<std::unique_ptr<Subprocess>> ranks;
  for (const auto& environment : environments) {
    ranks.push_back(
        std::make_unique<Subprocess>(std::vector<std::string>{HELLO_ALLREDUCE}, environment));
  }
  const std::string sum = std::to_string(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r) {
    const Finished f = ranks[static_cast<std::size_t>(r)]->wait(60s);
    EXPECT_EQ(f.exit_code(), 0) << "rank " << r << ": " << f.err;
    const std::string expected = "rank " + std::to_string(r) + " of " + std::to_string(n) +
                                 " (tcp): all_sum of 1048576 floats = " + sum + ", 0 wrong";
    EXPECT_NE(f.out.find(expected), std::string::npos) << f.out << f.err;
  }
}

std::vector<std::string> torchrun_env(int rank, int n, int port) {
  return {"RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(n),
          "LOCAL_RANK=" + std::to_string(rank),
          "LOCAL_WORLD_SIZE=" + std::to_string(n),
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port),
          "RLX_CONNECT_TIMEOUT_S=30"};
}

TEST(LaunchSources, TorchrunStyleRanksFormOneGroupWithRankZeroHostingTheRendezvous) {
  const int port = free_port();
  std::vector<std::vector<std::string>> environments;
  for (int r = 3; r >= 0; --r) environments.insert(environments.begin(), torchrun_env(r, 4, port));
  expect_one_group(environments);
}

TEST(LaunchSources, TorchrunStyleRanksWithTheirOwnTokenRejectAStrangerWithAnother) {
  const int port = free_port();
  auto rank0 = torchrun_env(0, 2, port), rank1 = torchrun_env(1, 2, port);
  rank0.push_back("RLX_JOB_TOKEN=ours");
  rank1.push_back("RLX_JOB_TOKEN=ours");
  auto stranger = torchrun_env(1, 2, port);
  stranger.push_back("RLX_JOB_TOKEN=theirs");
  stranger.push_back("RLX_CONNECT_TIMEOUT_S=3");
  Subprocess first(std::vector<std::string>{HELLO_ALLREDUCE}, rank0);
  Subprocess wrong(std::vector<std::string>{HELLO_ALLREDUCE}, stranger);
  const Finished refused = wrong.wait(30s);
  EXPECT_NE(refused.exit_code(), 0) << refused.out;
  Subprocess second(std::vector<std::string>{HELLO_ALLREDUCE}, rank1);
  const Finished f0 = first.wait(60s), f1 = second.wait(60s);
  EXPECT_EQ(f0.exit_code(), 0) << f0.err;
  EXPECT_NE(f0.err.find("wrong job token"), std::string::npos) << f0.err;  // dropped, logged
  EXPECT_EQ(f1.exit_code(), 0) << f1.err;
  EXPECT_NE(f1.out.find("rank 1 of 2 (tcp)"), std::string::npos) << f1.out;
}

// Starts a torchrun-style rank of `n` with `extra` settings (which replace
// torchrun_env's: a process reads the first of two).
std::unique_ptr<Subprocess> torchrun_rank(int rank, int n, int port,
                                          const std::vector<std::string>& extra = {}) {
  auto env = torchrun_env(rank, n, port);
  for (const std::string& setting : extra) {
    const std::string name = setting.substr(0, setting.find('=') + 1);
    std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(name); });
    env.push_back(setting);
  }
  return std::make_unique<Subprocess>(std::vector<std::string>{HELLO_ALLREDUCE}, env);
}

// Ranks 0 and 1 of 3 start, rank 2 never does: both give up at their
// connect deadline naming rank 2 (rank 0 hosts the rendezvous; rank 1 only
// hears from it, and may see it close first when rank 0 gives up).
TEST(LaunchSources, TorchrunStyleRanksNameARankThatNeverStarts) {
  const int port = free_port();
  auto first = torchrun_rank(0, 3, port, {"RLX_CONNECT_TIMEOUT_S=2"});
  auto second = torchrun_rank(1, 3, port, {"RLX_CONNECT_TIMEOUT_S=2"});
  for (auto* rank : {first.get(), second.get()}) {
    const Finished f = rank->wait(30s);
    EXPECT_NE(f.exit_code(), 0) << f.out;
    EXPECT_NE(f.err.find("the table of ranks did not arrive: "), std::string::npos) << f.err;
    EXPECT_NE(f.err.find("; rank 2 has not registered (2 of 3 have)"), std::string::npos) << f.err;
  }
}

// Rank 2 holds another RLX_JOB_TOKEN: rank 0's rendezvous refuses it, and
// ranks 0 and 1 name it as missing and say what was refused.
TEST(LaunchSources, TorchrunStyleRanksNameARankRefusedForItsToken) {
  const int port = free_port();
  const std::vector<std::string> ours = {"RLX_JOB_TOKEN=ours", "RLX_CONNECT_TIMEOUT_S=3"};
  auto first = torchrun_rank(0, 3, port, ours);
  auto second = torchrun_rank(1, 3, port, ours);
  auto stranger = torchrun_rank(2, 3, port, {"RLX_JOB_TOKEN=theirs", "RLX_CONNECT_TIMEOUT_S=3"});
  const Finished refused = stranger->wait(30s);
  EXPECT_NE(refused.exit_code(), 0);
  EXPECT_NE(refused.err.find("the peer closed the connection after this rank registered: the "
                             "rendezvous refused the registration"),
            std::string::npos)
      << refused.err;
  for (auto* rank : {first.get(), second.get()}) {
    const Finished f = rank->wait(30s);
    EXPECT_NE(f.exit_code(), 0) << f.out;
    EXPECT_NE(f.err.find("rank 2 has not registered (2 of 3 have); it refused 127.0.0.1: wrong "
                         "job token (the registration's MAC does not verify) from a process that "
                         "says it is rank 2 of 3"),
              std::string::npos)
        << f.err;
  }
}

// Rank 0 hosts the rendezvous: when it never starts, the others say so.
TEST(LaunchSources, TorchrunStyleRanksNameAMissingRankZeroAsTheRendezvousHost) {
  const int port = free_port();
  const Finished f = torchrun_rank(1, 2, port, {"RLX_CONNECT_TIMEOUT_S=1"})->wait(30s);
  EXPECT_NE(f.exit_code(), 0) << f.out;
  EXPECT_NE(f.err.find("rank 0, which hosts the rendezvous at MASTER_ADDR:MASTER_PORT, never "
                       "answered: could not connect to 127.0.0.1:" +
                       std::to_string(port)),
            std::string::npos)
      << f.err;
}

// An IPv4 address of this host other than loopback, or "" when it has none.
std::string other_local_address() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (const ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET ||
        (a->ifa_flags & IFF_LOOPBACK) != 0 || (a->ifa_flags & IFF_UP) == 0) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof text);
    found = text;
  }
  ::freeifaddrs(list);
  return found;
}

// 0 when a TCP connection to address:port is accepted, else its errno.
int connect_error(const std::string& address, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, address.c_str(), &to.sin_addr);
  const int error = ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 ? 0 : errno;
  ::close(fd);
  return error;
}

// Rank 0 hosts the rendezvous on MASTER_ADDR, an address of this host: it
// listens there only (it listened on 0.0.0.0), so the port is refused on
// every other address; the job still forms.
TEST(LaunchSources, TorchrunStyleRankZeroListensOnlyOnMasterAddr) {
  std::vector<std::string> masters = {"127.0.0.1"};
  if (const std::string other = other_local_address(); !other.empty()) masters.push_back(other);
  for (const std::string& master : masters) {
    const std::string elsewhere = master == "127.0.0.1" ? "127.0.0.2" : "127.0.0.1";
    const int port = free_port();
    auto env0 = torchrun_env(0, 2, port), env1 = torchrun_env(1, 2, port);
    for (auto* env : {&env0, &env1})
      std::replace(env->begin(), env->end(), std::string("MASTER_ADDR=127.0.0.1"),
                   "MASTER_ADDR=" + master);
    Subprocess first(std::vector<std::string>{HELLO_ALLREDUCE}, env0);
    const auto until = std::chrono::steady_clock::now() + 20s;
    while (connect_error(master, port) != 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(connect_error(master, port), 0) << "rank 0 does not listen on " << master;
    EXPECT_EQ(connect_error(elsewhere, port), ECONNREFUSED)
        << "rank 0 also listens on " << elsewhere << " (MASTER_ADDR=" << master << ")";
    Subprocess second(std::vector<std::string>{HELLO_ALLREDUCE}, env1);
    for (auto* rank : {&first, &second}) {
      const Finished f = rank->wait(60s);
      EXPECT_EQ(f.exit_code(), 0) << f.err;
      EXPECT_NE(f.out.find(" of 2 (tcp): all_sum of 1048576 floats = 3, 0 wrong"),
                std::string::npos)
          << f.out;
    }
  }
}

// A host's "ips"[0] in an mlx.launch hostfile is where its ranks listen,
// not only where they are reached (they listened on 0.0.0.0).
TEST(LaunchSources, RlxrunRanksListenOnTheirHostsIpsAddressOnly) {
  const std::string address = other_local_address();
  if (address.empty()) GTEST_SKIP() << "this host has no address besides loopback";
  const fs::path file =
      fs::path(::testing::TempDir()) / ("mlx_ips_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << R"({"hosts": [{"ssh": "localhost", "ips": [")" << address
                      << R"("]}, {"ssh": "localhost", "ips": [")" << address << R"("]}]})";
  const fs::path pid_file = fs::path(file).replace_extension("pid");
  fs::remove(pid_file);
  // Rank 1 starts 3 s late, so rank 0 listens (and waits) meanwhile. The
  // sleep is the stimulus; a later rank 1 only leaves more time to look.
  Subprocess job({RLXRUN, "--hostfile", file.string(), "-n", "2", "sh", "-c",
                  "if [ $RLX_RANK = 1 ]; then sleep 3; else echo $$ > " + pid_file.string() +
                      "; fi; exec " HELLO_ALLREDUCE});
  std::vector<std::string> listeners;
  std::string rank0;
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (listeners.empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(50ms);
    if (rank0.empty()) std::ifstream(pid_file) >> rank0;
    if (!rank0.empty()) listeners = listening_sockets_matching(",pid=" + rank0 + ",");
  }
  ASSERT_FALSE(listeners.empty()) << "rank 0 never listened";
  for (const std::string& line : listeners) {
    EXPECT_NE(line.find(" " + address + ":"), std::string::npos) << line;
  }
  const Finished f = job.wait(60s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  EXPECT_NE(f.out.find("rank 1 of 2 (tcp): all_sum of 1048576 floats = 3, 0 wrong"),
            std::string::npos)
      << f.out;
  fs::remove(file);
  fs::remove(pid_file);
}

TEST(LaunchSources, MlxLaunchRanksJoinThroughTheStaticHostfile) {
  const fs::path file =
      fs::path(::testing::TempDir()) / ("mlx_hosts_" + std::to_string(::getpid()) + ".json");
  constexpr int kRanks = 3;
  {
    std::ofstream out(file);
    out << "[";
    for (int r = 0; r < kRanks; ++r) {
      out << (r ? ", " : "") << "[\"127.0.0.1:" << free_port() << "\"]";
    }
    out << "]";
  }
  std::vector<std::vector<std::string>> environments;
  for (int r = 0; r < kRanks; ++r) {
    environments.push_back({"MLX_RANK=" + std::to_string(r), "MLX_HOSTFILE=" + file.string(),
                            "RLX_CONNECT_TIMEOUT_S=30"});
  }
  expect_one_group(environments);
  fs::remove(file);
}

TEST(LaunchSources, AnMlxWorldSizeThatDisagreesWithTheHostfileIsAnError) {
  const fs::path file =
      fs::path(::testing::TempDir()) / ("mlx_two_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << "[[\"127.0.0.1:" << free_port() << "\"], [\"127.0.0.1:" << free_port()
                      << "\"]]";
  Subprocess rank({HELLO_ALLREDUCE},
                  {"MLX_RANK=0", "MLX_WORLD_SIZE=3", "MLX_HOSTFILE=" + file.string()});
  const Finished f = rank.wait(30s);
  EXPECT_NE(f.exit_code(), 0) << f.out;
  EXPECT_NE(f.err.find("lists 2 ranks but the group has 3 (MLX_RANK/MLX_HOSTFILE)"),
            std::string::npos)
      << f.err;
  fs::remove(file);
}

// An MLX_RANK past the hostfile's hosts is a setting to fix, named in
// mlx.launch's words: not "rlx rank 5 of 2", nor RLX_HOSTFILE.
TEST(LaunchSources, AnMlxRankOutsideTheHostfileIsAnErrorNamingBothNumbers) {
  const fs::path file =
      fs::path(::testing::TempDir()) / ("mlx_rank5_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << "[[\"127.0.0.1:" << free_port() << "\"], [\"127.0.0.1:" << free_port()
                      << "\"]]";
  Subprocess rank({HELLO_ALLREDUCE}, {"MLX_RANK=5", "MLX_HOSTFILE=" + file.string()});
  const Finished f = rank.wait(30s);
  EXPECT_NE(f.exit_code(), 0) << f.out;
  EXPECT_NE(f.err.find("invalid argument: MLX_RANK=5 but MLX_HOSTFILE lists 2 hosts (" +
                       file.string() + ")"),
            std::string::npos)
      << f.err;
  EXPECT_EQ(f.err.find("rank 5 of 2"), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("RLX_HOSTFILE"), std::string::npos) << f.err;
  fs::remove(file);
}

TEST(LaunchSources, RlxrunReadsMlxLaunchsObjectHostfileWithItsIpsAndEnvs) {
  const fs::path file =
      fs::path(::testing::TempDir()) / ("mlx_object_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream out(file);
    out << R"({"backend": "ring", "envs": ["FROM_HOSTFILE=yes", "RLX_TIMEOUT_S=40"],
               "hosts": [{"ssh": "localhost", "ips": ["127.0.0.1"]},
                         {"ssh": "localhost", "ips": ["127.0.0.1"]}]})";
  }
  Subprocess job({RLXRUN, "--hostfile", file.string(), "-n", "2", "sh", "-c",
                  "echo \"env $FROM_HOSTFILE $RLX_TIMEOUT_S $RLX_HOST_ADDRESS\"; "
                  "exec " HELLO_ALLREDUCE});
  const Finished f = job.wait(60s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  for (const char* tag : {"[0] ", "[1] "}) {
    EXPECT_NE(f.out.find(std::string(tag) + "env yes 40 127.0.0.1"), std::string::npos) << f.out;
  }
  EXPECT_NE(f.out.find("rank 1 of 2 (tcp): all_sum of 1048576 floats = 3, 0 wrong"),
            std::string::npos)
      << f.out;
  fs::remove(file);
}

TEST(LaunchSources, APartialEnvironmentIsAnErrorNotAGroupOfOne) {
  Subprocess torch({HELLO_ALLREDUCE}, {"RANK=1", "WORLD_SIZE=4"});
  const Finished f = torch.wait(30s);
  EXPECT_NE(f.exit_code(), 0) << f.out;
  EXPECT_NE(f.err.find("MASTER_ADDR, MASTER_PORT not: a partial torchrun environment"),
            std::string::npos)
      << f.err;
  Subprocess mlx({HELLO_ALLREDUCE}, {"MLX_RANK=0"});
  const Finished g = mlx.wait(30s);
  EXPECT_NE(g.exit_code(), 0) << g.out;
  EXPECT_NE(g.err.find("MLX_HOSTFILE not: a partial mlx.launch environment"), std::string::npos)
      << g.err;
}

}  // namespace
}  // namespace rlx::testing
