#include "tests/support/job_harness.h"

#include <atomic>
#include <climits>
#include <thread>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rlx/launcher/local_process.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/shm/segment.h"

extern char** environ;

namespace rlx::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Running {
  pid_t pid = -1;
  int fds[2] = {-1, -1};
  RankOutcome outcome;
  bool done = false;
};

std::vector<std::string> environment_for(const JobSpec& spec, int rank,
                                         const rendezvous::Server& server) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).rfind("RLX_", 0) != 0) env.emplace_back(*e);
  }
  env.push_back(std::string(launch_env::kRank) + "=" + std::to_string(rank));
  env.push_back(std::string(launch_env::kWorldSize) + "=" + std::to_string(spec.ranks));
  if (spec.use_coordinator) {
    env.push_back(std::string(launch_env::kCoordinator) + "=" + server.address().to_string());
  }
  env.push_back(std::string(launch_env::kJobToken) + "=" + server.token());
  env.push_back(std::string(launch_env::kBackend) + "=tcp");
  for (const auto& extra : spec.env) {  // the spec's settings win
    const std::string name = extra.substr(0, extra.find('=') + 1);
    std::erase_if(env, [&](const std::string& e) { return e.rfind(name, 0) == 0; });
    env.push_back(extra);
  }
  return env;
}

// Reads whatever output is ready; closes streams at end of file.
void pump(std::vector<Running>& ranks, int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<std::pair<Running*, int>> owners;
  for (auto& r : ranks) {
    for (int s = 0; s < 2; ++s) {
      if (r.fds[s] < 0) continue;
      fds.push_back({r.fds[s], POLLIN, 0});
      owners.emplace_back(&r, s);
    }
  }
  if (fds.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(timeout_ms, 10)));
    return;
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    auto [rank, stream] = owners[i];
    char buffer[4096];
    const ssize_t n = ::read(rank->fds[stream], buffer, sizeof buffer);
    if (n > 0) {
      (stream == 0 ? rank->outcome.out : rank->outcome.err)
          .append(buffer, static_cast<std::size_t>(n));
    } else {
      ::close(rank->fds[stream]);
      rank->fds[stream] = -1;
    }
  }
}

void reap(std::vector<Running>& ranks) {
  for (auto& r : ranks) {
    if (r.done) continue;
    if (::waitpid(r.pid, &r.outcome.status, WNOHANG) == r.pid) r.done = true;
  }
}

bool all_finished(const std::vector<Running>& ranks) {
  for (const auto& r : ranks) {
    if (!r.done || r.fds[0] >= 0 || r.fds[1] >= 0) return false;
  }
  return true;
}

}  // namespace

bool RankOutcome::exited_ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
bool RankOutcome::killed_by(int signal) const {
  return WIFSIGNALED(status) && WTERMSIG(status) == signal;
}

JobOutcome run_job(const JobSpec& spec) {
  const auto start = Clock::now();
  // Each job its own token, as rlxrun gives: jobs of tests running at once
  // must not share an identity (shared-memory segments are named from it).
  static std::atomic<int> jobs{0};
  const std::string token =
      "test-token-" + std::to_string(::getpid()) + "-" + std::to_string(jobs++);
  rendezvous::Server server(spec.ranks, token, "127.0.0.1");
  std::vector<Running> ranks(static_cast<std::size_t>(spec.ranks));
  for (int r = 0; r < spec.ranks; ++r) {
    auto child =
        launcher::spawn_local({.argv = spec.argv, .environment = environment_for(spec, r, server)});
    ranks[static_cast<std::size_t>(r)].pid = child.pid;
    ranks[static_cast<std::size_t>(r)].fds[0] = child.stdout_fd;
    ranks[static_cast<std::size_t>(r)].fds[1] = child.stderr_fd;
  }
  bool hook_ran = !spec.while_running;
  const auto deadline = start + spec.limit;
  while (!all_finished(ranks) && Clock::now() < deadline) {
    pump(ranks, 20);
    reap(ranks);
    if (!hook_ran && (server.complete() || !spec.use_coordinator)) {
      hook_ran = true;
      spec.while_running(server);
    }
  }
  for (auto& r : ranks) {
    if (r.done) continue;
    ::kill(r.pid, SIGKILL);
    ::waitpid(r.pid, &r.outcome.status, 0);
    r.outcome.err += "\n[harness] killed at the test's limit\n";
  }
  for (auto& r : ranks) {
    for (int fd : r.fds) {
      if (fd >= 0) ::close(fd);
    }
  }
  // As rlxrun does when a job ends: a rank that died between creating its
  // shared-memory segment and its peers mapping it leaves nothing behind.
  shm::remove_job_segments(shm::kDefaultDirectory, token);
  JobOutcome outcome;
  for (auto& r : ranks) outcome.ranks.push_back(std::move(r.outcome));
  outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  return outcome;
}

std::string sibling_program(const std::string& name) {
  char self[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string dir(self, static_cast<std::size_t>(n > 0 ? n : 0));
  return dir.substr(0, dir.rfind('/') + 1) + name;
}

}  // namespace rlx::testing
