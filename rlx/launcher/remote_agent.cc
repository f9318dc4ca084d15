#include "rlx/launcher/remote_agent.h"

#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rlx/launcher/agent_request.h"
#include "rlx/launcher/local_process.h"
#include "rlx/launcher/output.h"

namespace rlx::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kKillGrace = std::chrono::seconds(5);

void say(const std::string& message) {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  write_all(STDERR_FILENO, "rlxrun agent on " + std::string(host) + ": " + message + "\n");
}

// True once nobody reads `fd` any more: for the pipe or socket sshd gave us
// as stdout or stderr, that means the ssh session is over.
bool reader_gone(const pollfd& entry) { return (entry.revents & (POLLERR | POLLHUP)) != 0; }

class Agent {
 public:
  int run(const AgentRequest& request) {
    try {
      signal_fd_ = watch_process_signals();
      child_ = spawn_local({.argv = request.argv,
                            .environment = environment_with(request.environment),
                            .cwd = request.cwd,
                            .stdin_mode = StdinMode::inherit,
                            .capture_output = false,
                            .cpus = cpus_for_rank(request.bind_to, request.local_rank,
                                                  request.local_size, this_host_topology())})
                   .pid;
    } catch (const std::exception& error) {
      say(error.what());
      return 127;
    }
    // The rank holds the session's stdin now; ours would keep it open.
    close(STDIN_FILENO);
    while (!status_) watch_once();
    return *status_;
  }

 private:
  void watch_once() {
    pollfd fds[3] = {{signal_fd_, POLLIN, 0},
                     {session_open_ ? STDOUT_FILENO : -1, 0, 0},
                     {session_open_ ? STDERR_FILENO : -1, 0, 0}};
    int timeout_ms = -1;
    if (kill_deadline_) {
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(*kill_deadline_ - Clock::now());
      timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
    }
    poll(fds, 3, timeout_ms);
    if (fds[0].revents != 0) handle_signals();
    if (session_open_ && (reader_gone(fds[1]) || reader_gone(fds[2]))) {
      session_open_ = false;
      stop_rank(SIGTERM);
    }
    if (kill_deadline_ && Clock::now() >= *kill_deadline_) {
      killpg(child_, SIGKILL);
      kill_deadline_.reset();
    }
  }

  void handle_signals() {
    signalfd_siginfo info;
    while (read(signal_fd_, &info, sizeof info) == sizeof info) {
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD) {
        reap();
      } else if (sig != SIGUSR1) {  // rlxrun's status request (Slurm may send it to every task)
        stop_rank(sig);
      }
    }
  }

  void stop_rank(int sig) {
    killpg(child_, sig);
    if (!kill_deadline_) kill_deadline_ = Clock::now() + kKillGrace;
  }

  void reap() {
    int wait_status = 0;
    if (waitpid(child_, &wait_status, WNOHANG) != child_) return;
    if (WIFSIGNALED(wait_status)) {
      const int sig = WTERMSIG(wait_status);
      if (session_open_) {
        say("the rank was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")");
      }
      status_ = 128 + sig;
    } else {
      status_ = WEXITSTATUS(wait_status);
    }
  }

  int signal_fd_ = -1;
  pid_t child_ = -1;
  bool session_open_ = true;
  std::optional<int> status_;
  std::optional<Clock::time_point> kill_deadline_;
};

}  // namespace

int run_remote_agent() {
  AgentRequest request;
  try {
    request = read_agent_request(STDIN_FILENO);
  } catch (const AgentRequestError& error) {
    say(error.what());
    return 127;
  }
  return Agent().run(request);
}

}  // namespace rlx::launcher
