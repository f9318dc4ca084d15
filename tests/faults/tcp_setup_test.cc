// How ranks find each other, end to end with real processes: a static JSON
// table with no coordinator (IPv6 and IPv4), RLX_IFNAME, and the congestion
// control their connections run (RLX_TCP_CONGESTION).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rlx/transport/socket_io.h"
#include "tests/support/job_harness.h"
#include "tests/support/local_net.h"

namespace rlx::testing {
namespace {

using namespace std::chrono_literals;

std::string write_table(const std::string& host, int family, int ranks) {
  const std::string path = ::testing::TempDir() + "/rlx_hosts_" + std::to_string(family) + ".json";
  std::ofstream file(path);
  file << "[";
  for (int r = 0; r < ranks; ++r) {
    file << (r ? ", " : "") << "\"" << host << ":" << free_port(family) << "\"";
  }
  file << "]\n";
  return path;
}

void expect_job_ok(const JobOutcome& job, int ranks, const std::string& backend_line) {
  ASSERT_EQ(job.ranks.size(), static_cast<std::size_t>(ranks));
  for (const auto& rank : job.ranks) {
    EXPECT_TRUE(rank.exited_ok()) << rank.out << rank.err;
    EXPECT_NE(rank.out.find(backend_line), std::string::npos) << rank.out << rank.err;
    EXPECT_NE(rank.out.find("0 wrong"), std::string::npos) << rank.out;
  }
}

// Two ranks of hello_allreduce through rlxrun's rendezvous, with `setting` in their environment.
void expect_hello_runs_with(const std::string& setting) {
  expect_job_ok(run_job({.ranks = 2,
                         .argv = {sibling_program("../../examples/hello_allreduce")},
                         .env = {setting},
                         .limit = 60s}),
                2, "of 2 (tcp)");
}

// A job whose ranks are all on this host is reached through loopback only:
// its ranks listen there, not on every address of the host.
TEST(TcpSetup, ALocalJobListensOnLoopbackOnly) {
  const std::string ready = ::testing::TempDir() + "rlx_loopback_ready_" + std::to_string(getpid());
  std::remove(ready.c_str());
  std::remove((ready + ".stop").c_str());
  std::future<std::vector<std::string>> inspection;
  auto inspect = [&](const rendezvous::Server&) {
    inspection = std::async(std::launch::async, [ready] {
      const auto until = std::chrono::steady_clock::now() + 20s;
      while (!std::filesystem::exists(ready) && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(10ms);
      }
      auto found = listening_sockets_matching("\"fault_program\"");
      if (std::FILE* stop = std::fopen((ready + ".stop").c_str(), "w")) std::fclose(stop);
      return found;
    });
  };
  const JobOutcome job = run_job({.ranks = 3,
                                  .argv = {sibling_program("fault_program"), "steady"},
                                  .env = {"RLX_STEADY_MS=30000", "RLX_STEADY_READY_FILE=" + ready,
                                          "RLX_STEADY_STOP_FILE=" + ready + ".stop"},
                                  .limit = 60s,
                                  .while_running = inspect});
  ASSERT_TRUE(inspection.valid());
  const std::vector<std::string> listeners = inspection.get();
  for (const auto& rank : job.ranks) EXPECT_TRUE(rank.exited_ok()) << rank.out << rank.err;
  EXPECT_EQ(listeners.size(), 3u);
  for (const auto& line : listeners) {
    EXPECT_TRUE(line.find(" 127.0.0.1:") != std::string::npos ||
                line.find(" [::1]:") != std::string::npos)
        << line;
  }
}

TEST(TcpSetup, StaticTableOverIpv6WithoutACoordinator) {
  const std::string table = write_table("[::1]", AF_INET6, 3);
  expect_job_ok(run_job({.ranks = 3,
                         .argv = {sibling_program("../../examples/hello_allreduce")},
                         .env = {"RLX_HOSTFILE=" + table},
                         .limit = 60s,
                         .use_coordinator = false}),
                3, "of 3 (tcp)");
}

TEST(TcpSetup, StaticTableOverIpv4) {
  const std::string table = write_table("127.0.0.1", AF_INET, 2);
  expect_job_ok(run_job({.ranks = 2,
                         .argv = {sibling_program("../../examples/hello_allreduce")},
                         .env = {"RLX_HOSTFILE=" + table},
                         .limit = 60s,
                         .use_coordinator = false}),
                2, "of 2 (tcp)");
}

TEST(TcpSetup, InterfaceChosenByName) { expect_hello_runs_with("RLX_IFNAME=lo"); }

TEST(TcpSetup, AnUnreachableCoordinatorFailsAtTheConnectDeadlineNamingIt) {
  const JobOutcome job = run_job(
      {.ranks = 1,
       .argv = {sibling_program("../../examples/hello_allreduce")},
       .env = {"RLX_WORLD_SIZE=2", "RLX_COORDINATOR=127.0.0.1:1", "RLX_CONNECT_TIMEOUT_S=1"},
       .limit = 30s,
       .use_coordinator = false});
  ASSERT_EQ(job.ranks.size(), 1u);
  EXPECT_FALSE(job.ranks[0].exited_ok());
  EXPECT_NE(job.ranks[0].err.find("127.0.0.1:1"), std::string::npos) << job.ranks[0].err;
  EXPECT_LT(job.elapsed, 10s);
}

TEST(TcpSetup, ANamedCongestionControlRunsTheJob) {
  expect_hello_runs_with("RLX_TCP_CONGESTION=reno");
}

TEST(TcpSetup, ACongestionControlTheKernelRefusesFailsEveryRankNamingIt) {
  const JobOutcome job = run_job({.ranks = 2,
                                  .argv = {sibling_program("../../examples/hello_allreduce")},
                                  .env = {"RLX_TCP_CONGESTION=no_such_algo"},
                                  .limit = 30s});
  ASSERT_EQ(job.ranks.size(), 2u);
  for (const auto& rank : job.ranks) {
    EXPECT_FALSE(rank.exited_ok());
    EXPECT_NE(rank.err.find("RLX_TCP_CONGESTION='no_such_algo'"), std::string::npos) << rank.err;
    EXPECT_NE(rank.err.find("tcp_available_congestion_control"), std::string::npos) << rank.err;
  }
  EXPECT_LT(job.elapsed, 10s);
}

}  // namespace
}  // namespace rlx::testing
