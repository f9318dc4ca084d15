// rlxrun end to end with real processes: output tagging, the failing rank's
// status, teardown of the others, SIGINT and SIGKILL to the launcher (no rank
// outlives it), --timeout, --output-dir and bad command lines.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>

#include "rlx/launcher/binding.h"
#include "tests/support/subprocess.h"

namespace rlx::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Ranks that record their pid and then run until stopped.
const char* kRecordPidThenRun = "echo $$ > \"$PIDS/pid.$RLX_RANK\"; exec sleep infinity";

class Rlxrun : public ::testing::Test {
 protected:
  void SetUp() override {
    pids_dir_ = fs::path(::testing::TempDir()) /
                ("rlxrun_" + std::to_string(::getpid()) + "_" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(pids_dir_);
    fs::create_directories(pids_dir_);
  }
  void TearDown() override { fs::remove_all(pids_dir_); }

  std::vector<std::string> env() const { return {"PIDS=" + pids_dir_.string()}; }

  std::vector<pid_t> rank_pids(std::size_t expected, std::chrono::milliseconds limit) const {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::vector<pid_t> pids;
    do {
      pids.clear();
      for (const auto& entry : fs::directory_iterator(pids_dir_)) {
        std::ifstream file(entry.path());
        pid_t pid = 0;
        if (file >> pid) pids.push_back(pid);
      }
    } while (pids.size() < expected && std::chrono::steady_clock::now() < deadline);
    return pids;
  }

  static void expect_all_gone(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (pid_t pid : pids) {
      while (process_alive(pid) && std::chrono::steady_clock::now() < deadline) {
      }
      EXPECT_FALSE(process_alive(pid)) << "rank process " << pid << " outlived the job";
    }
  }

  fs::path pids_dir_;
};

TEST_F(Rlxrun, ShowsHowManyRanksHaveJoinedWhileTheyStart) {
  // Rank 1 joins 1.5 s late: past the quiet first second, so progress shows.
  // The sleep is the stimulus (a slow rank), not a wait for anything: being
  // later still, on a loaded machine, only shows more progress lines.
  const std::string late = "if [ \"$RLX_RANK\" = 1 ]; then sleep 1.5; fi; exec " HELLO_ALLREDUCE;
  Subprocess job({RLXRUN, "-n", "2", "sh", "-c", late}, env());
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  EXPECT_NE(f.err.find("rlxrun: 1 of 2 ranks connected"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("rlxrun: all 2 ranks connected in"), std::string::npos) << f.err;
}

TEST_F(Rlxrun, NamesRanksThatHaveNotJoinedAtTheStartDeadline) {
  // The launcher's start deadline is 2 s; rank 2 joins at 3.5 s (the ranks
  // themselves wait up to 30 s), so the job still succeeds. The sleep is the
  // stimulus; a loaded machine only makes rank 2 later still.
  const std::string late =
      "if [ \"$RLX_RANK\" = 2 ]; then sleep 3.5; fi; RLX_CONNECT_TIMEOUT_S=30 "
      "exec " HELLO_ALLREDUCE;
  Subprocess job({RLXRUN, "-n", "3", "--env", "RLX_CONNECT_TIMEOUT_S=2", "sh", "-c", late}, env());
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  EXPECT_NE(f.err.find("rlxrun: rank 2 (on localhost) did not join the job's rendezvous within"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("(2 of 3 did)"), std::string::npos) << f.err;
}

TEST_F(Rlxrun, QuickStartsShowNoProgress) {
  Subprocess job({RLXRUN, "-n", "2", HELLO_ALLREDUCE}, env());
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  EXPECT_EQ(f.err.find("ranks connected"), std::string::npos) << f.err;
}

TEST_F(Rlxrun, TagsEveryRanksOutputAndSucceeds) {
  Subprocess job({RLXRUN, "-n", "3", "sh", "-c",
                  "echo hello from $RLX_RANK of $RLX_WORLD_SIZE; echo oops >&2"});
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  for (int r = 0; r < 3; ++r) {
    const std::string tag = "[" + std::to_string(r) + "] ";
    EXPECT_NE(f.out.find(tag + "hello from " + std::to_string(r) + " of 3\n"), std::string::npos)
        << f.out;
    EXPECT_NE(f.err.find(tag + "oops\n"), std::string::npos) << f.err;
  }
}

TEST_F(Rlxrun, TimestampOutputPutsTheTimeBeforeEachTaggedLine) {
  Subprocess job({RLXRUN, "-n", "2", "--timestamp-output", "sh", "-c", "echo hi; echo oops >&2"});
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  // "2026-11-27 03:30:00.123 [1] hi": digits where the pattern has 9.
  const auto stamped = [](std::string_view line) {
    constexpr std::string_view kPattern = "9999-99-99 99:99:99.999 [";
    if (line.size() < kPattern.size() + 4) return false;
    for (std::size_t i = 0; i < kPattern.size(); ++i) {
      const bool digit = line[i] >= '0' && line[i] <= '9';
      if (kPattern[i] == '9' ? !digit : line[i] != kPattern[i]) return false;
    }
    const std::string_view rest = line.substr(kPattern.size() + 1);
    return (line[kPattern.size()] == '0' || line[kPattern.size()] == '1') &&
           (rest == "] hi" || rest == "] oops");
  };
  for (const std::string* stream : {&f.out, &f.err}) {
    std::istringstream lines(*stream);
    int matched = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("rlxrun:")) continue;
      EXPECT_TRUE(stamped(line)) << line;
      ++matched;
    }
    EXPECT_EQ(matched, 2) << *stream;
  }
}

// Each rank's CPUs as the kernel lists them ("0", "0-1"), by rank, from
// `grep Cpus_allowed_list /proc/self/status` run as every rank.
std::map<int, std::string> cpus_by_rank(const std::string& tagged_output) {
  std::map<int, std::string> out;
  std::istringstream lines(tagged_output);
  for (std::string line; std::getline(lines, line);) {
    const auto tab = line.find('\t');
    if (!line.starts_with("[") || tab == std::string::npos) continue;
    out[std::stoi(line.substr(1))] = line.substr(tab + 1);
  }
  return out;
}

// By default (as mpirun) up to 2 ranks get a core each, and ranks that
// outnumber the cores run anywhere; --bind-to core gives every rank a core,
// and with more ranks than cores fails before anything starts. The suite's
// environment sets RLX_BIND_TO=none (concurrent jobs would share cores), so
// this test clears it.
TEST_F(Rlxrun, BindsRanksToCoresWhereTheyFit) {
  const auto cores = static_cast<int>(launcher::this_host_topology().cores.size());
  ASSERT_GE(cores, 1);
  const std::vector<std::string> show = {"sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  auto run = [&](std::vector<std::string> flags) {
    std::vector<std::string> argv{"env", "-u", "RLX_BIND_TO", RLXRUN};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), show.begin(), show.end());
    return Subprocess(argv).wait(30s);
  };
  const std::string everything = cpus_by_rank(run({"-n", "1", "--bind-to", "none"}).out)[0];
  auto expect_a_core_each = [&](const Finished& f, int ranks) {
    ASSERT_EQ(f.exit_code(), 0) << f.err;
    const auto by_rank = cpus_by_rank(f.out);
    ASSERT_EQ(static_cast<int>(by_rank.size()), ranks) << f.out;
    std::set<std::string> distinct;
    for (const auto& [rank, cpus] : by_rank) distinct.insert(cpus);
    EXPECT_EQ(static_cast<int>(distinct.size()), ranks) << f.out;
    if (cores > 1) {
      EXPECT_EQ(distinct.count(everything), 0u) << f.out;
    }
  };
  const int pair = std::min(cores, 2);
  expect_a_core_each(run({"-n", std::to_string(pair)}), pair);
  expect_a_core_each(run({"-n", std::to_string(cores), "--bind-to", "core"}), cores);

  const Finished crowded = run({"-n", std::to_string(cores + 1)});
  ASSERT_EQ(crowded.exit_code(), 0) << crowded.err;
  for (const auto& [rank, cpus] : cpus_by_rank(crowded.out)) EXPECT_EQ(cpus, everything) << rank;

  const Finished refused = run({"-n", std::to_string(cores + 1), "--bind-to", "core"});
  EXPECT_EQ(refused.exit_code(), 2);
  EXPECT_NE(refused.err.find("--bind-to core: " + std::to_string(cores + 1) + " ranks"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(refused.out, "");
}

// What a terminal shows for `raw`: each line after its carriage returns
// and erases ("\r", "\033[K") have been applied.
std::vector<std::string> rendered_lines(const std::string& raw) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t cursor = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\n') {
      lines.push_back(line);
      line.clear();
      cursor = 0;
    } else if (raw[i] == '\r') {
      cursor = 0;
    } else if (raw.compare(i, 3, "\033[K") == 0) {
      line.resize(cursor);
      i += 2;
    } else {
      if (cursor < line.size()) {
        line[cursor] = raw[i];
      } else {
        line.push_back(raw[i]);
      }
      ++cursor;
    }
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

TEST_F(Rlxrun, OnATerminalRankOutputNeverSharesTheProgressLine) {
  // Under script(1), a pseudo-terminal: rank 1 prints while the progress
  // line shows (it joins late, past the quiet first second).
  const std::string rank_program =
      "if [ \"$RLX_RANK\" = 1 ]; then sleep 1.4; echo middle; sleep 0.6; fi; exec " HELLO_ALLREDUCE;
  const std::string command = std::string(RLXRUN) + " -n 2 sh -c '" + rank_program + "'";
  Subprocess job({"script", "-q", "-e", "-c", command, "/dev/null"}, env());
  const Finished f = job.wait(30s);
  ASSERT_EQ(f.exit_code(), 0) << f.out << f.err;
  bool progress = false, middle = false;
  for (const std::string& line : rendered_lines(f.out)) {
    EXPECT_FALSE(line.find("rlxrun:") != std::string::npos &&
                 line.find("middle") != std::string::npos)
        << "one line holds both: " << line;
    progress = progress || line.find("rlxrun: all 2 ranks connected") != std::string::npos;
    middle = middle || line == "[1] middle";
  }
  EXPECT_TRUE(progress) << f.out;
  EXPECT_TRUE(middle) << f.out;
}

TEST_F(Rlxrun, AFailingRankStopsTheOthersAndItsStatusIsTheJobs) {
  Subprocess job({RLXRUN, "-n", "3", "sh", "-c",
                  std::string("if [ $RLX_RANK = 1 ]; then exit 3; fi; ") + kRecordPidThenRun},
                 env());
  const auto start = std::chrono::steady_clock::now();
  const Finished f = job.wait(30s);
  EXPECT_FALSE(f.timed_out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(f.exit_code(), 3);
  EXPECT_NE(f.err.find("rank 1 (pid"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("exited with status 3"), std::string::npos) << f.err;
  expect_all_gone(rank_pids(0, 0ms), 5s);
}

// Ranks that die between creating their shared memory and unlinking it:
// when the job ends, rlxrun has removed their segments from /dev/shm.
TEST_F(Rlxrun, SharedMemoryOfRanksThatDiedIsRemovedWhenTheJobEnds) {
  Subprocess job({RLXRUN, "-n", "2", SHM_LEFTOVER}, env());
  const Finished f = job.wait(30s);
  EXPECT_FALSE(f.timed_out);
  EXPECT_EQ(f.exit_code(), 5) << f.err;
  for (const char* rank : {"0", "1"}) {
    std::ifstream file(pids_dir_ / (std::string("shm.") + rank));
    std::string path;
    ASSERT_TRUE(std::getline(file, path)) << "rank " << rank << " made no segment: " << f.err;
    EXPECT_TRUE(path.starts_with("/dev/shm/rlx-")) << path;
    EXPECT_FALSE(fs::exists(path)) << path << " outlived the job";
  }
}

TEST_F(Rlxrun, ARankKilledByASignalIsNamedWithTheSignal) {
  Subprocess job({RLXRUN, "-n", "2", "sh", "-c",
                  std::string("if [ $RLX_RANK = 0 ]; then kill -9 $$; fi; ") + kRecordPidThenRun},
                 env());
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 128 + SIGKILL);
  EXPECT_NE(f.err.find("rank 0"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("killed by signal 9"), std::string::npos) << f.err;
}

TEST_F(Rlxrun, SigintStopsTheWholeJob) {
  Subprocess job({RLXRUN, "-n", "3", "sh", "-c", kRecordPidThenRun}, env());
  const auto pids = rank_pids(3, 10s);
  ASSERT_EQ(pids.size(), 3u);
  ::kill(job.pid(), SIGINT);
  const Finished f = job.wait(20s);
  EXPECT_EQ(f.exit_code(), 128 + SIGINT);
  EXPECT_NE(f.err.find("received SIGINT"), std::string::npos) << f.err;
  expect_all_gone(pids, 5s);
}

TEST_F(Rlxrun, NoRankOutlivesALauncherKilledBySigkill) {
  Subprocess job({RLXRUN, "-n", "3", "sh", "-c", kRecordPidThenRun}, env());
  const auto pids = rank_pids(3, 10s);
  ASSERT_EQ(pids.size(), 3u);
  ::kill(job.pid(), SIGKILL);
  job.wait(10s);
  expect_all_gone(pids, 5s);
}

TEST_F(Rlxrun, TimeoutEndsTheJobNamingTheRanksStillRunning) {
  Subprocess job({RLXRUN, "-n", "2", "--timeout", "0.5", "sh", "-c", kRecordPidThenRun}, env());
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 124);
  EXPECT_NE(f.err.find("still running: ranks 0, 1 (on localhost)"), std::string::npos) << f.err;
  expect_all_gone(rank_pids(0, 0ms), 5s);
}

TEST_F(Rlxrun, OutputDirKeepsEachRanksStreams) {
  const fs::path dir = pids_dir_ / "out";
  Subprocess job({RLXRUN, "-n", "2", "--output-dir", dir.string(), "sh", "-c",
                  "echo out-$RLX_RANK; echo err-$RLX_RANK >&2"});
  EXPECT_EQ(job.wait(30s).exit_code(), 0);
  for (int r = 0; r < 2; ++r) {
    std::ifstream out(dir / ("rank." + std::to_string(r) + ".out"));
    std::ifstream err(dir / ("rank." + std::to_string(r) + ".err"));
    std::string o, e;
    std::getline(out, o);
    std::getline(err, e);
    EXPECT_EQ(o, "out-" + std::to_string(r));
    EXPECT_EQ(e, "err-" + std::to_string(r));
  }
}

TEST_F(Rlxrun, BadCommandLinesExitTwoSayingWhy) {
  const Finished no_count = Subprocess({RLXRUN, "sh"}).wait(10s);
  EXPECT_EQ(no_count.exit_code(), 2);
  EXPECT_NE(no_count.err.find("-n N is required"), std::string::npos) << no_count.err;
  const Finished missing = Subprocess({RLXRUN, "-n", "2", "/nonexistent/program"}).wait(10s);
  EXPECT_NE(missing.exit_code(), 0);
  EXPECT_NE(missing.err.find("No such file or directory"), std::string::npos) << missing.err;
}

TEST_F(Rlxrun, HostListsPlaceRanksBySlotsAndSetLocalRanks) {
  Subprocess job({RLXRUN, "-n", "3", "-H", "localhost:2,127.0.0.1", "sh", "-c",
                  "echo at $RLX_RANK $RLX_LOCAL_RANK/$RLX_LOCAL_SIZE"});
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  EXPECT_NE(f.out.find("[0] at 0 0/2"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("[1] at 1 1/2"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("[2] at 2 0/1"), std::string::npos) << f.out;
}

TEST_F(Rlxrun, BrokenHostfilesAndTooFewSlotsExitTwoNamingTheProblem) {
  const fs::path hostfile = pids_dir_ / "hosts";
  std::ofstream(hostfile) << "localhost slots=2\nlocalhost slots=two\n";
  const Finished broken =
      Subprocess({RLXRUN, "-n", "2", "--hostfile", hostfile.string(), "true"}).wait(10s);
  EXPECT_EQ(broken.exit_code(), 2);
  EXPECT_NE(broken.err.find(hostfile.string() + ":2: 'slots=two'"), std::string::npos)
      << broken.err;
  const Finished full = Subprocess({RLXRUN, "-n", "3", "-H", "localhost:2", "true"}).wait(10s);
  EXPECT_EQ(full.exit_code(), 2);
  EXPECT_NE(full.err.find("--oversubscribe"), std::string::npos) << full.err;
  EXPECT_EQ(Subprocess({RLXRUN, "-n", "3", "-H", "localhost:2", "--oversubscribe", "true"})
                .wait(10s)
                .exit_code(),
            0);
}

// Rank 2 freezes (SIGSTOP); the others time out naming it and exit 3. rlxrun
// names the stopped rank too, and ends the job within a second of the
// first report (the frozen rank is continued so SIGTERM reaches it), long
// before the test's own helper would kill it (10 s).
TEST_F(Rlxrun, AFrozenRankIsNamedAndTheJobEndsWithinTheGrace) {
  const auto start = std::chrono::steady_clock::now();
  Subprocess job({RLXRUN, "-n", "3", "--env", "RLX_TIMEOUT_S=2", FAULT_PROGRAM, "frozen"});
  const Finished f = job.wait(30s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(f.exit_code(), 3) << f.out << f.err;
  EXPECT_NE(f.err.find(") is stopped by SIGSTOP and answers nobody"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("rank 2 (pid"), std::string::npos) << f.err;
  EXPECT_LT(took, 8s) << f.err;
  // Both survivors' own reports reach the output: the first to exit does not
  // take the other down before it prints.
  for (const char* tag : {"[0] RESULT kind=timeout", "[1] RESULT kind=timeout"}) {
    EXPECT_NE(f.out.find(tag), std::string::npos) << f.out;
  }
}

// Rank 1 stops itself and rank 0 exits 0: no peer is left to time it out.
// rlxrun gives it RLX_TIMEOUT_S to be continued, then ends the job naming it
// (before, it waited forever).
TEST_F(Rlxrun, ARankLeftStoppedAfterTheOthersExitedEndsTheJobAtItsDeadline) {
  const auto start = std::chrono::steady_clock::now();
  Subprocess job({RLXRUN, "-n", "2", "--env", "RLX_TIMEOUT_S=1", "sh", "-c",
                  "[ $RLX_RANK = 1 ] && kill -STOP $$; echo done"});
  const Finished f = job.wait(30s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(f.exit_code(), 1) << f.out << f.err;
  EXPECT_NE(f.err.find("every rank still running stayed stopped for RLX_TIMEOUT_S (1000 ms); "
                       "rank 1 (pid"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find(") is stopped by SIGSTOP and answers nobody"), std::string::npos) << f.err;
  EXPECT_NE(f.out.find("[0] done"), std::string::npos) << f.out;
  EXPECT_LT(took, 10s) << f.err;
}

// A stopped rank that someone continues within the deadline finishes its
// work, however long it takes after: rank 1 works 3 s after it is continued,
// past the 2 s deadline that rank 0's exit armed (SIGCONT disarms it).
// Rank 0 waits for the event (rank 1's State: T, polled with a bound); the
// 0.3 s after it only gives rlxrun time to see the stop and arm the
// deadline: if it has not, the test exercises less but still passes. The
// 3 s of work are the stimulus, not a wait for anything.
TEST_F(Rlxrun, AStoppedRankContinuedBeforeItsDeadlineFinishesTheJob) {
  const std::string continue_rank_1 =
      "for i in $(seq 400); do p=$(cat \"$PIDS/stopped\" 2>/dev/null); "
      "[ -n \"$p\" ] && grep -q '^State:[[:space:]]*T' /proc/$p/status && break; sleep 0.05; "
      "done; sleep 0.3; kill -CONT $p";
  Subprocess job({RLXRUN, "-n", "2", "--env", "RLX_TIMEOUT_S=2", "sh", "-c",
                  "if [ $RLX_RANK = 1 ]; then echo $$ > \"$PIDS/stopped\"; kill -STOP $$; "
                  "sleep 3; else (" +
                      continue_rank_1 + ") >/dev/null 2>&1 & fi; echo done"},
                 env());
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.out << f.err;
  EXPECT_NE(f.out.find("[1] done"), std::string::npos) << f.out;
}

// Every rank of a mismatch reports it before rlxrun stops the job (one run
// in three lost ranks 1 and 2's messages when the others were stopped at once).
TEST_F(Rlxrun, EveryRanksOwnErrorReachesTheOutputBeforeTeardown) {
  for (int run = 0; run < 5; ++run) {
    Subprocess job({RLXRUN, "-n", "3", "sh", "-c",
                    std::string(FAULT_PROGRAM) + " mismatch_op && exit 3; exit 1"});
    const Finished f = job.wait(30s);
    EXPECT_EQ(f.exit_code(), 3) << f.err;
    for (const char* tag :
         {"[0] RESULT kind=collective mismatch", "[1] RESULT kind=collective mismatch",
          "[2] RESULT kind=collective mismatch"}) {
      EXPECT_NE(f.out.find(tag), std::string::npos) << "run " << run << "\n" << f.out;
    }
  }
}

// After a failed job rlxrun reads its ranks' flight records and names the
// culprit: the rank and the call (docs/RELIABILITY.md).
std::string flight_record_of(const std::string& mode, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {RLXRUN, "-n", "3"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  // A rank that saw its expected error exits 3: a failed job, as in the field.
  // The shell around it stays in its process group, which rlxrun asks.
  argv.insert(argv.end(),
              {"sh", "-c", std::string(FAULT_PROGRAM) + " " + mode + " && exit 3; exit 1"});
  const Finished f = Subprocess(argv).wait(60s);
  EXPECT_NE(f.exit_code(), 0) << f.err;
  std::string lines;
  std::istringstream err(f.err);
  for (std::string line; std::getline(err, line);) {
    if (line.starts_with("rlxrun: flight record: ")) lines += line + "\n";
  }
  EXPECT_FALSE(lines.empty()) << f.out << f.err;
  return lines;
}

TEST_F(Rlxrun, FlightRecordNamesARankStuckOutsideRlxAndTheCallItMissed) {
  const auto start = std::chrono::steady_clock::now();
  const std::string lines = flight_record_of("stuck", {"--env", "RLX_TIMEOUT_S=2"});
  EXPECT_NE(lines.find("rank 2 never entered all_reduce sum of 64 x f32 #3 of group world, "
                       "which ranks 0, 1 failed in; it last finished all_reduce sum of 64 x f32 "
                       "#2, and is in no rlx call"),
            std::string::npos)
      << lines;
  // The timeout, the report grace and the dump: not the sleeping rank's minute.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

TEST_F(Rlxrun, FlightRecordPutsASkippedCollectiveBesideWhatTheOthersCalled) {
  EXPECT_NE(flight_record_of("skipped_collective")
                .find("ranks disagree on call #5 of group world: ranks 0, 2 called all_reduce "
                      "sum of 64 x f32; rank 1 called barrier"),
            std::string::npos);
}

TEST_F(Rlxrun, FlightRecordShowsMismatchedSizesSideBySide) {
  EXPECT_NE(flight_record_of("mismatch_size")
                .find("ranks disagree on call #0 of group world: ranks 0, 2 called all_reduce "
                      "sum of 2000 x f32; rank 1 called all_reduce sum of 1000 x f32"),
            std::string::npos);
}

TEST_F(Rlxrun, FlightRecordNamesAKilledRankByTheRecordItDidNotLeave) {
  const std::string lines = flight_record_of("peer_killed");
  EXPECT_NE(lines.find("rank 2 left no record (killed, or stopped before it could write one); "
                       "ranks 0, 1 failed in all_reduce sum of 262144 x f32 #5 of group world: "),
            std::string::npos)
      << lines;
  EXPECT_NE(lines.find("peer lost"), std::string::npos) << lines;
}

// With the user's RLX_DUMP_DIR the dumps stay, and rlx-analyze reads them as
// rlxrun did.
TEST_F(Rlxrun, TheUsersDumpDirKeepsTheDumpsAndRlxAnalyzeAgrees) {
  const fs::path dumps = pids_dir_ / "dumps";
  const Finished f = Subprocess({RLXRUN, "-n", "3", "--env", "RLX_DUMP_DIR=" + dumps.string(), "sh",
                                 "-c", std::string(FAULT_PROGRAM) + " mismatch_size && exit 3"})
                         .wait(60s);
  EXPECT_EQ(f.exit_code(), 3) << f.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_TRUE(fs::exists(dumps / ("rank-" + std::to_string(rank) + ".json"))) << rank;
  }
  const Finished analyzed = Subprocess({RLX_ANALYZE, dumps.string()}).wait(30s);
  EXPECT_EQ(analyzed.exit_code(), 0) << analyzed.err;
  const std::string line =
      "ranks disagree on call #0 of group world: ranks 0, 2 called all_reduce sum of 2000 x f32; "
      "rank 1 called all_reduce sum of 1000 x f32";
  EXPECT_EQ(analyzed.out, line + "\n");
  EXPECT_NE(f.err.find("rlxrun: flight record: " + line), std::string::npos) << f.err;
  EXPECT_EQ(Subprocess({RLX_ANALYZE, (pids_dir_ / "none").string()}).wait(30s).exit_code(), 1);
  EXPECT_EQ(Subprocess({RLX_ANALYZE}).wait(30s).exit_code(), 2);
}

// rlxrun asks only processes whose rlx said it answers SIGUSR1: to anything
// else (here a shell that traps it) a stray SIGUSR1 would be an attack.
// RLX_TRACE: every rank's calls, one Chrome trace event each, merged for
// the job; a rank killed mid-sleep keeps what it wrote before.
TEST_F(Rlxrun, ATraceHoldsEveryCallOfEveryRankMergedForTheJob) {
  const fs::path traces = pids_dir_ / "traces";
  const std::string lines = flight_record_of(
      "stuck", {"--env", "RLX_TIMEOUT_S=2", "--env", "RLX_TRACE=" + traces.string()});
  std::ifstream file(traces / "trace.json");
  ASSERT_TRUE(file.good()) << lines;
  const auto trace = nlohmann::json::parse(file);
  std::map<int, std::vector<nlohmann::json>> calls;
  std::set<std::string> processes;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("ph") == "X") calls[event.at("pid").get<int>()].push_back(event);
    if (event.at("name") == "process_name") processes.insert(event.at("args").at("name"));
  }
  EXPECT_EQ(processes.size(), 3u);
  ASSERT_EQ(calls.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    // The stuck rank made 3 calls; the others a 4th, which timed out.
    const auto& mine = calls[rank];
    ASSERT_EQ(mine.size(), rank == 2 ? 3u : 4u) << rank;
    for (std::size_t i = 0; i < mine.size(); ++i) {
      const auto& args = mine[i].at("args");
      EXPECT_EQ(mine[i].at("name"), "all_reduce");
      EXPECT_EQ(args.at("sequence"), i);
      EXPECT_EQ(args.at("count"), 64);
      EXPECT_EQ(args.at("path"), "shared memory");
      EXPECT_GE(mine[i].at("dur").get<double>(), 0.0);
      EXPECT_EQ(args.at("state"), i == 3 ? "failed" : "done") << rank << " " << i;
    }
    if (rank < 2) {
      EXPECT_NE(mine[3].at("args").at("error").get<std::string>().find("rank 2"),
                std::string::npos);
    }
  }
}

// SIGUSR1 to rlxrun: what every rank is doing, while the job goes on.
TEST_F(Rlxrun, Sigusr1PrintsWhatEveryRankIsDoingWithoutStoppingTheJob) {
  Subprocess job(
      {RLXRUN, "-n", "3", "--env", "RLX_TIMEOUT_S=60", std::string(FAULT_PROGRAM), "stuck"});
  const std::string waiting =
      "rlxrun: status: ranks 0, 1: in all_reduce sum of 64 x f32 #3 of "
      "group world";
  // Asked again until the ranks are there: rlxrun reads signals once its
  // ranks start (SIGUSR1 before then ends it, as it ends dd).
  bool answered = job.wait_for_output(waiting, 1s);
  for (int tries = 0; tries < 30 && !answered; ++tries) {
    ::kill(job.pid(), SIGUSR1);
    answered = job.wait_for_output(waiting, 1s);
  }
  EXPECT_TRUE(answered);
  EXPECT_TRUE(process_alive(job.pid()));
  ::kill(job.pid(), SIGTERM);
  const Finished f = job.wait(30s);
  EXPECT_NE(f.err.find("rlxrun: status: rank 2 never entered all_reduce sum of 64 x f32 #3 of "
                       "group world, which ranks 0, 1 wait in"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("rlxrun: status: rank 2: in no rlx call; the last one, all_reduce sum of 64 "
                       "x f32 #2 of group world, finished"),
            std::string::npos)
      << f.err;
  EXPECT_NE(f.err.find("received SIGTERM"), std::string::npos) << f.err;
}

TEST_F(Rlxrun, AProgramWithASigusr1OfItsOwnIsNeverSentOne) {
  const Finished f =
      Subprocess({RLXRUN, "-n", "2", "sh", "-c",
                  "trap 'echo got SIGUSR1' USR1; [ \"$RLX_RANK\" = 1 ] && exit 1; sleep 5 & wait"})
          .wait(30s);
  EXPECT_EQ(f.exit_code(), 1) << f.err;
  EXPECT_EQ(f.out.find("got SIGUSR1"), std::string::npos) << f.out;
}

TEST_F(Rlxrun, AnOutputDirThatCannotBeWrittenExitsTwoBeforeAnyRankStarts) {
  const fs::path file = pids_dir_ / "a-file";
  std::ofstream(file) << "not a directory";
  const fs::path marker = pids_dir_ / "ran";
  const Finished f = Subprocess({RLXRUN, "-n", "2", "--output-dir", (file / "out").string(), "sh",
                                 "-c", "touch " + marker.string()})
                         .wait(30s);
  EXPECT_EQ(f.exit_code(), 2) << f.err;
  EXPECT_NE(f.err.find("--output-dir: cannot create " + (file / "out").string()), std::string::npos)
      << f.err;
  EXPECT_FALSE(fs::exists(marker));
}

// No -n with a host list: a rank per slot, as mpirun.
TEST_F(Rlxrun, AHostListWithoutDashNStartsARankPerSlot) {
  Subprocess job(
      {RLXRUN, "-H", "localhost:2,127.0.0.1", "sh", "-c", "echo at $RLX_RANK of $RLX_WORLD_SIZE"});
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  for (const char* line : {"[0] at 0 of 3", "[1] at 1 of 3", "[2] at 2 of 3"}) {
    EXPECT_NE(f.out.find(line), std::string::npos) << f.out;
  }
}

// mpirun's -x NAME: rlxrun's own value reaches every rank.
TEST_F(Rlxrun, DashXPassesItsOwnVariableToEveryRank) {
  Subprocess job({RLXRUN, "-np", "2", "-x", "MY_SETTING", "sh", "-c", "echo got $MY_SETTING"},
                 {"MY_SETTING=forty two"});
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  EXPECT_NE(f.out.find("[0] got forty two"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("[1] got forty two"), std::string::npos) << f.out;
}

// torchrun's names, so torch.distributed's env:// and other frameworks start
// under rlxrun: the same rank numbers, and rank 0's address and a free port.
TEST_F(Rlxrun, RanksGetTorchrunsVariablesToo) {
  Subprocess job({RLXRUN, "-H", "localhost:2,127.0.0.1", "sh", "-c",
                  "echo torch $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE at "
                  "$MASTER_ADDR:$MASTER_PORT"},
                 {"RANK=9", "MASTER_PORT=1"});
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  const auto at = f.out.find("[0] torch 0 3 0 2 at 127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << f.out;
  const std::string port = f.out.substr(f.out.find(':', at) + 1, 5);
  EXPECT_GT(std::stoi(port), 1) << f.out;
  EXPECT_NE(f.out.find("[1] torch 1 3 1 2 at 127.0.0.1:" + std::to_string(std::stoi(port))),
            std::string::npos)
      << f.out;
  EXPECT_NE(f.out.find("[2] torch 2 3 0 1 at 127.0.0.1:" + std::to_string(std::stoi(port))),
            std::string::npos)
      << f.out;
}

TEST_F(Rlxrun, ItsOwnRlxSettingsReachEveryRankAndEnvFlagsWin) {
  Subprocess job({RLXRUN, "-n", "2", "--env", "RLX_TCP_LANES=3", "sh", "-c",
                  "echo settings $RLX_TIMEOUT_S $RLX_TCP_LANES $RLX_RANK"},
                 {"RLX_TIMEOUT_S=20", "RLX_TCP_LANES=1", "RLX_RANK=7"});
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  EXPECT_NE(f.out.find("[0] settings 20 3 0"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("[1] settings 20 3 1"), std::string::npos) << f.out;
}

TEST_F(Rlxrun, AMalformedSettingInItsEnvironmentExitsTwoNamingIt) {
  const Finished f = Subprocess({RLXRUN, "-n", "2", "true"}, {"RLX_TIMEOUT_S=soon"}).wait(30s);
  EXPECT_EQ(f.exit_code(), 2) << f.err;
  EXPECT_NE(f.err.find("RLX_TIMEOUT_S='soon' is not valid"), std::string::npos) << f.err;
}

TEST_F(Rlxrun, RanksInheritNoneOfItsDescriptors) {
  // ls's own directory handle is 3; anything above is rlxrun's (its
  // rendezvous socket, other ranks' pipes) leaking into the rank.
  Subprocess job({RLXRUN, "-n", "2", "ls", "/proc/self/fd"});
  const Finished f = job.wait(30s);
  EXPECT_EQ(f.exit_code(), 0) << f.err;
  std::istringstream lines(f.out);
  int listed = 0;
  for (std::string tag, fd; lines >> tag >> fd; ++listed) {
    EXPECT_LE(std::stoi(fd), 3) << f.out;
  }
  EXPECT_GE(listed, 6) << f.out;  // 0 1 2 3 on each of two ranks, at least
}

TEST_F(Rlxrun, AnUnknownHostExitsTwoNamingIt) {
  const Finished f =
      Subprocess({RLXRUN, "-n", "2", "-H", "localhost,no-such-host.invalid", "true"}).wait(30s);
  EXPECT_EQ(f.exit_code(), 2) << f.err;
  EXPECT_NE(f.err.find("no-such-host.invalid"), std::string::npos) << f.err;
}

TEST_F(Rlxrun, ADirectoryOrABinaryFileAsHostfileExitsTwoSayingWhat) {
  const Finished directory =
      Subprocess({RLXRUN, "-n", "2", "--hostfile", pids_dir_.string(), "true"}).wait(10s);
  EXPECT_EQ(directory.exit_code(), 2);
  EXPECT_NE(directory.err.find("is a directory"), std::string::npos) << directory.err;
  const fs::path binary = pids_dir_ / "binary";
  std::ofstream(binary, std::ios::binary) << std::string("host\x01\x02\x1b[31m\0\xff", 10);
  const Finished raw =
      Subprocess({RLXRUN, "-n", "2", "--hostfile", binary.string(), "true"}).wait(10s);
  EXPECT_EQ(raw.exit_code(), 2);
  EXPECT_NE(raw.err.find("is not a text file (byte 0x01 at offset 4)"), std::string::npos)
      << raw.err;
  EXPECT_EQ(raw.err.find('\x1b'), std::string::npos) << "raw bytes echoed";
}

TEST_F(Rlxrun, MoreRanksThanTheFileLimitAllowsAreRefusedUpFront) {
  const Finished f =
      Subprocess({"prlimit", "--nofile=256:256", RLXRUN, "-n", "200", "true"}).wait(30s);
  EXPECT_EQ(f.exit_code(), 2) << f.err;
  EXPECT_NE(f.err.find("200 ranks need about 661 open files each"), std::string::npos) << f.err;
  EXPECT_NE(f.err.find("ulimit -n"), std::string::npos) << f.err;
}

// Random command lines from rlxrun's own vocabulary and junk: every one ends
// in a clean exit (0, 1, 2, 124 or 127), never a crash or a hang.
TEST_F(Rlxrun, NoCommandLineCrashesIt) {
  const std::vector<std::string> words = {"-n",
                                          "--np",
                                          "0",
                                          "1",
                                          "2",
                                          "-1",
                                          "99999999999",
                                          "--hostfile",
                                          "/nonexistent",
                                          "-H",
                                          "localhost:2",
                                          "localhost:x",
                                          ",,",
                                          "--oversubscribe",
                                          "--rsh",
                                          "",
                                          "--backend",
                                          "tcp",
                                          "verbs",
                                          "nccl",
                                          "--ifname",
                                          "nope0",
                                          "--timeout",
                                          "0.2",
                                          "-5",
                                          "nan",
                                          "--env",
                                          "A=B",
                                          "=",
                                          "RLX_TIMEOUT_S=x",
                                          "-x",
                                          "--cwd",
                                          "/nonexistent",
                                          "--tag-output",
                                          "--no-tag-output",
                                          "--output-dir",
                                          (pids_dir_ / "o").string(),
                                          "--dry-run",
                                          "--help",
                                          "--version",
                                          "--",
                                          "-",
                                          "true",
                                          "false",
                                          "--remote-agent",
                                          std::string(300, 'n'),
                                          "\xff\xfe"};
  std::uint64_t state = 0x9e3779b97f4a7c15u;
  auto next = [&state](std::size_t bound) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return static_cast<std::size_t>(state % bound);
  };
  for (int trial = 0; trial < 120; ++trial) {
    std::vector<std::string> argv{RLXRUN};
    const std::size_t length = 1 + next(7);
    for (std::size_t i = 0; i < length; ++i) argv.push_back(words[next(words.size())]);
    if (next(2) == 0) argv.push_back("true");
    const Finished f = Subprocess(argv).wait(20s);
    std::string line;
    for (const auto& word : argv) line += " '" + word + "'";
    EXPECT_FALSE(f.timed_out) << line;
    EXPECT_TRUE(WIFEXITED(f.status)) << line << " ended by a signal: " << f.err;
    const int code = f.exit_code();
    EXPECT_TRUE(code == 0 || code == 1 || code == 2 || code == 124 || code == 127)
        << line << " exited " << code << ": " << f.err;
  }
}

}  // namespace
}  // namespace rlx::testing
