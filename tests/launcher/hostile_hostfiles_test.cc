// Hostfiles a hostile new user found (issue 27), end to end: rlxrun with
// --hostfile, and ranks reading RLX_HOSTFILE or MLX_HOSTFILE themselves.
// 100,000 nested brackets crashed both (a stack overflow), /dev/zero or an
// endless pipe was read without bound, a FIFO nobody writes blocked forever,
// and an mlx.launch hostfile's "envs" could place ranks or carry a malformed
// setting past rlxrun. Each must now be an error naming the file, in bounded
// time, before any rank starts (rlxrun: exit 2).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/subprocess.h"

namespace rlx::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class HostileHostfiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("hostile_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) const {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path;
  }

  // rlxrun with `hostfile`, whose ranks would leave a marker: none may start.
  Finished rlxrun_with(const fs::path& hostfile, std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {RLXRUN, "-n", "2", "--hostfile", hostfile.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.insert(argv.end(), {"sh", "-c", "touch " + marker().string() + "; exec " HELLO_ALLREDUCE});
    return Subprocess(argv).wait(30s);
  }
  fs::path marker() const { return dir_ / "a-rank-started"; }

  fs::path dir_;
};

// A rank started by mlx.launch or by hand, reading the table itself.
Finished rank_reading(const std::string& variable, const fs::path& table,
                      std::vector<std::string> env = {}) {
  if (variable == "MLX_HOSTFILE") {
    env.push_back("MLX_RANK=0");
  } else {
    env.insert(env.end(), {"RLX_RANK=0", "RLX_WORLD_SIZE=2"});
  }
  env.push_back(variable + "=" + table.string());
  return Subprocess({HELLO_ALLREDUCE}, env).wait(30s);
}

void expect_refused(const Finished& f, const std::string& fragment) {
  EXPECT_FALSE(f.timed_out);
  EXPECT_TRUE(WIFEXITED(f.status)) << "ended by a signal: " << f.err;
  EXPECT_NE(f.exit_code(), 0);
  EXPECT_NE(f.err.find(fragment), std::string::npos) << f.err.substr(0, 2000);
  EXPECT_LT(f.err.size(), 2000u) << "an error quoted the file: " << f.err.substr(0, 2000);
}

TEST_F(HostileHostfiles, ADeeplyNestedFileIsAnErrorNotACrash) {
  const fs::path deep = write("deep.json", std::string(100'000, '[') + std::string(100'000, ']'));
  const Finished launcher = rlxrun_with(deep);
  expect_refused(launcher, deep.string() + ": nests lists or objects more than 32 deep");
  EXPECT_EQ(launcher.exit_code(), 2);
  EXPECT_FALSE(fs::exists(marker()));
  for (const char* variable : {"RLX_HOSTFILE", "MLX_HOSTFILE"}) {
    const Finished rank = rank_reading(variable, deep);
    expect_refused(rank, std::string("read ") + variable + ": invalid argument: " + deep.string() +
                             ": nests lists or objects more than 32 deep");
  }
}

TEST_F(HostileHostfiles, DevZeroOrAnEndlessPipeIsRefusedAtOnce) {
  const auto start = Clock::now();
  const Finished zero = rlxrun_with("/dev/zero");
  expect_refused(zero, "/dev/zero: is not a text file (byte 0x00 at offset 0)");
  EXPECT_EQ(zero.exit_code(), 2);
  expect_refused(rank_reading("MLX_HOSTFILE", "/dev/zero"),
                 "read MLX_HOSTFILE: invalid argument: /dev/zero: is not a text file");
  // A pipe that never ends, of text: `yes` writes hundreds of MiB a second.
  const Finished endless =
      Subprocess(
          {"bash", "-c",
           std::string(RLXRUN) + " -n 2 --hostfile <(yes localhost) touch " + marker().string()})
          .wait(30s);
  expect_refused(endless, "is longer than 4 MiB, the most a hostfile may hold");
  EXPECT_EQ(endless.exit_code(), 2);
  EXPECT_FALSE(fs::exists(marker()));
  EXPECT_LT(Clock::now() - start, 10s);
}

TEST_F(HostileHostfiles, AFifoNobodyWritesFailsAtTheConnectDeadline) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto start = Clock::now();
  const Finished launcher = rlxrun_with(fifo, {"--env", "RLX_CONNECT_TIMEOUT_S=1"});
  const auto launcher_took = Clock::now() - start;
  expect_refused(launcher,
                 fifo.string() + ": nothing to read within RLX_CONNECT_TIMEOUT_S (1 s): a FIFO");
  EXPECT_EQ(launcher.exit_code(), 2);
  EXPECT_FALSE(fs::exists(marker()));
  EXPECT_GE(launcher_took, 1s);
  EXPECT_LT(launcher_took, 5s);
  for (const char* variable : {"RLX_HOSTFILE", "MLX_HOSTFILE"}) {
    start = Clock::now();
    const Finished rank = rank_reading(variable, fifo, {"RLX_CONNECT_TIMEOUT_S=1"});
    const auto rank_took = Clock::now() - start;
    expect_refused(rank, std::string("read ") + variable + ": invalid argument: " + fifo.string() +
                             ": nothing to read within RLX_CONNECT_TIMEOUT_S (1 s)");
    EXPECT_LT(rank_took, 5s);
  }
}

// RLX_RANK and RLX_WORLD_SIZE in "envs" made `rlxrun -n 2` two groups of
// one that both exited 0.
TEST_F(HostileHostfiles, EnvsThatPlaceRanksAreRefusedBeforeAnyRankStarts) {
  const fs::path file = write("mlx.json", R"({"hosts": ["localhost", "localhost"],
                                              "envs": ["RLX_RANK=0", "RLX_WORLD_SIZE=1"]})");
  const Finished f = rlxrun_with(file);
  expect_refused(f, file.string() +
                        ": \"envs\" sets RLX_RANK, which the launcher sets for each rank; "
                        "\"envs\" apply to every rank alike");
  EXPECT_EQ(f.exit_code(), 2);
  EXPECT_FALSE(fs::exists(marker()));
}

TEST_F(HostileHostfiles, AMalformedSettingInEnvsExitsTwoBeforeAnyRankStarts) {
  const fs::path file = write("mlx.json", R"({"hosts": ["localhost", "localhost"],
                                              "envs": ["RLX_TIMEOUT_S=abc"]})");
  const Finished f = rlxrun_with(file);
  expect_refused(f, file.string() + ": \"envs\": RLX_TIMEOUT_S='abc' is not valid");
  EXPECT_EQ(f.exit_code(), 2);
  EXPECT_FALSE(fs::exists(marker()));
}

}  // namespace
}  // namespace rlx::testing
