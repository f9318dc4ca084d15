// Shared-memory segments never outlive a job that was killed during set-up
// (docs/RELIABILITY.md): real ranks, killed the moment their segment appears
// in /dev/shm, with no launcher to clean up after them (a torchrun-style
// start) and with the launcher itself killed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rlx/transport/shm/segment.h"
#include "tests/support/local_net.h"
#include "tests/support/subprocess.h"

namespace rlx::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Files created in /dev/shm from now on, as inotify reports them: a test
// acts within microseconds of a rank creating its segment.
class CreatedFiles {
 public:
  CreatedFiles() : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    EXPECT_GE(::inotify_add_watch(fd_, shm::kDefaultDirectory, IN_CREATE), 0);
  }
  ~CreatedFiles() { ::close(fd_); }

  // The next file whose name starts with `prefix`, or "" after `limit`.
  std::string next(const std::string& prefix, std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      for (; !pending_.empty(); pending_.erase(pending_.begin())) {
        if (pending_.front().starts_with(prefix)) {
          std::string name = pending_.front();
          pending_.erase(pending_.begin());
          return name;
        }
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= 0ms) return "";
      pollfd ready{fd_, POLLIN, 0};
      if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
      alignas(inotify_event) char buffer[4096];
      const ssize_t n = ::read(fd_, buffer, sizeof buffer);
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        if (event->len > 0) pending_.emplace_back(event->name);
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
  }

 private:
  int fd_;
  std::vector<std::string> pending_;
};

// The creating process a segment's name records (its last field).
pid_t creator_of(const std::string& name) {
  return static_cast<pid_t>(std::stol(name.substr(name.rfind('-') + 1)));
}

// The parent of a running process (0 once it is gone).
pid_t parent_of(pid_t pid) {
  std::FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (stat == nullptr) return 0;
  char line[512] = {};
  const bool read = std::fgets(line, sizeof line, stat) != nullptr;
  std::fclose(stat);
  const char* after_name = read ? std::strrchr(line, ')') : nullptr;  // "pid (name) S ppid"
  return after_name == nullptr ? 0 : static_cast<pid_t>(std::atol(after_name + 4));
}

bool exists(const std::string& name) { return fs::exists(fs::path(shm::kDefaultDirectory) / name); }

std::vector<std::string> torchrun_env(int rank, int n, int port, const std::string& token) {
  return {"RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(n),
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port),
          "RLX_JOB_TOKEN=" + token,
          "RLX_CONNECT_TIMEOUT_S=30",
          "RLX_TIMEOUT_S=30"};
}

// No launcher outlives these ranks: when one is killed between creating its
// segment and every peer mapping it, the survivors remove the group's names
// on their way out.
TEST(ShmCleanup, ARankKilledDuringSetUpLeavesNoSegmentUnderATorchrunStyleStart) {
  for (int run = 0; run < 3; ++run) {
    const std::string token =
        "shm-cleanup-" + std::to_string(::getpid()) + "-" + std::to_string(run);
    const std::string prefix = shm::SharedSegment::job_prefix(token);
    const int port = free_port();
    CreatedFiles created;
    std::vector<std::unique_ptr<Subprocess>> ranks;
    for (int r = 0; r < 3; ++r) {
      ranks.push_back(std::make_unique<Subprocess>(std::vector<std::string>{HELLO_ALLREDUCE},
                                                   torchrun_env(r, 3, port, token)));
    }
    // Rank 2's segment: its name ends "-2-<pid namespace>-<pid>".
    std::string victim;
    for (std::string name; victim.empty() && !(name = created.next(prefix, 30s)).empty();) {
      const auto fields = name.substr(0, name.rfind('-'));
      if (fields.substr(0, fields.rfind('-')).ends_with("-2")) victim = name;
    }
    ASSERT_FALSE(victim.empty()) << "rank 2 never created its segment";
    ASSERT_EQ(creator_of(victim), ranks[2]->pid());
    ::kill(ranks[2]->pid(), SIGKILL);
    EXPECT_EQ(ranks[2]->wait(30s).exit_code(), 128 + SIGKILL);
    for (int r = 0; r < 2; ++r) {
      const Finished f = ranks[static_cast<std::size_t>(r)]->wait(60s);
      EXPECT_FALSE(f.timed_out) << f.err;
      EXPECT_NE(f.exit_code(), 0) << "rank " << r << " carried on without rank 2: " << f.out;
    }
    for (const auto& entry : fs::directory_iterator(shm::kDefaultDirectory)) {
      EXPECT_FALSE(entry.path().filename().string().starts_with(prefix))
          << entry.path() << " was left behind (run " << run << ")";
    }
  }
}

// rlxrun killed with SIGKILL during set-up takes its ranks with it
// (PR_SET_PDEATHSIG), so nobody of that job is left to clean up: the next
// start of rlxrun on the host removes what they left.
TEST(ShmCleanup, WhatAKilledRlxrunLeftIsRemovedByTheNextStart) {
  CreatedFiles created;
  std::vector<std::string> left;
  // The kill must land between a segment's creation and its unlink: under
  // a sanitizer on a loaded machine 5 attempts once all missed that window.
  for (int attempt = 0; attempt < 20 && left.empty(); ++attempt) {
    Subprocess job({RLXRUN, "-n", "3", HELLO_ALLREDUCE});
    // This job's first segment: other tests' jobs may create theirs meanwhile.
    std::string first;
    for (std::string name; first.empty() && !(name = created.next("rlx-", 30s)).empty();) {
      if (parent_of(creator_of(name)) == job.pid()) first = name;
    }
    ASSERT_FALSE(first.empty()) << "no rank created a segment";
    ::kill(job.pid(), SIGKILL);
    job.wait(30s);
    const pid_t creator = creator_of(first);
    for (const auto deadline = Clock::now() + 10s;
         process_alive(creator) && Clock::now() < deadline;) {
      std::this_thread::sleep_for(10ms);  // PDEATHSIG is delivered asynchronously
    }
    if (exists(first)) left.push_back(first);
  }
  ASSERT_FALSE(left.empty()) << "no attempt left a segment behind: nothing was tested";
  Subprocess next({RLXRUN, "-n", "1", HELLO_ALLREDUCE});
  EXPECT_EQ(next.wait(60s).exit_code(), 0);
  for (const auto& name : left) EXPECT_FALSE(exists(name)) << name << " is still there";
}

}  // namespace
}  // namespace rlx::testing
