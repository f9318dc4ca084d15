#include "tests/support/subprocess.h"

#include <fstream>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rlx/launcher/local_process.h"

extern char** environ;

namespace rlx::testing {

int Finished::exit_code() const {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

Subprocess::Subprocess(const std::vector<std::string>& argv,
                       const std::vector<std::string>& extra_env) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  const auto child = launcher::spawn_local({.argv = argv, .environment = env});
  pid_ = child.pid;
  fds_[0] = child.stdout_fd;
  fds_[1] = child.stderr_fd;
}

Subprocess::~Subprocess() {
  if (!reaped_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

void Subprocess::pump(int timeout_ms) {
  pollfd fds[2];
  int count = 0;
  for (int s = 0; s < 2; ++s) {
    if (fds_[s] >= 0) fds[count++] = {fds_[s], POLLIN, 0};
  }
  if (count == 0 || ::poll(fds, static_cast<nfds_t>(count), timeout_ms) <= 0) return;
  for (int i = 0; i < count; ++i) {
    if (fds[i].revents == 0) continue;
    const int stream = fds[i].fd == fds_[0] ? 0 : 1;
    char buffer[4096];
    const ssize_t n = ::read(fds_[stream], buffer, sizeof buffer);
    if (n > 0) {
      (stream == 0 ? result_.out : result_.err).append(buffer, static_cast<std::size_t>(n));
    } else {
      ::close(fds_[stream]);
      fds_[stream] = -1;
    }
  }
}

bool Subprocess::wait_for_output(const std::string& text, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (result_.out.find(text) != std::string::npos ||
        result_.err.find(text) != std::string::npos) {
      return true;
    }
    if (fds_[0] < 0 && fds_[1] < 0) return false;
    pump(20);
  }
  return false;
}

Finished Subprocess::wait(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!reaped_) {
    pump(20);
    if (::waitpid(pid_, &result_.status, WNOHANG) == pid_) {
      reaped_ = true;
    } else if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &result_.status, 0);
      reaped_ = true;
      result_.timed_out = true;
    }
  }
  for (int i = 0; i < 50 && (fds_[0] >= 0 || fds_[1] >= 0); ++i)
    pump(20);  // the rest of the output
  return result_;
}

bool process_alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_text, name, state;
  stat >> pid_text >> name >> state;
  return state != "Z";  // an unreaped zombie has already died
}

}  // namespace rlx::testing
