#include "rlx/launcher/local_process.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "rlx/launcher/binding.h"

extern char** environ;

namespace rlx::launcher {
namespace {

struct Pipe {
  int read_end = -1;
  int write_end = -1;
};

Pipe make_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
  return {fds[0], fds[1]};
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const auto& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

struct ChildPipes {
  Pipe in, out, err, exec_error;
};

// Runs in the child between fork and exec: only async-signal-safe calls.
[[noreturn]] void become_rank(const SpawnSpec& spec, pid_t launcher, const ChildPipes& pipes,
                              char* const* argv, char* const* envp) {
  const Pipe& exec_error = pipes.exec_error;
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != launcher) _exit(127);  // the launcher died before prctl took effect
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  if (!bind_to_cpus(spec.cpus)) {
    const int code = -errno;  // negative: the binding failed, not the exec
    (void)!write(exec_error.write_end, &code, sizeof code);
    _exit(127);
  }
  if (spec.stdin_mode == StdinMode::null) {
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    dup2(null_fd, STDIN_FILENO);
  } else if (spec.stdin_mode == StdinMode::pipe) {
    dup2(pipes.in.read_end, STDIN_FILENO);
  }
  if (spec.capture_output) {
    dup2(pipes.out.write_end, STDOUT_FILENO);
    dup2(pipes.err.write_end, STDERR_FILENO);
  }
  // Nothing else of rlxrun's (the rendezvous socket, other ranks' pipes) may
  // reach the rank: a rank holding them would keep them open after rlxrun.
  close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
  if (!spec.cwd.empty() && chdir(spec.cwd.c_str()) != 0) {
    const int code = errno;
    (void)!write(exec_error.write_end, &code, sizeof code);
    _exit(127);
  }
  execvpe(argv[0], argv, envp);
  const int code = errno;
  (void)!write(exec_error.write_end, &code, sizeof code);
  _exit(127);
}

}  // namespace

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

int watch_process_signals() {
  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1}) sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  signal(SIGPIPE, SIG_IGN);
  const int fd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (fd < 0) throw std::runtime_error(std::string("signalfd: ") + strerror(errno));
  return fd;
}

void stop_watching_process_signals() {
  sigset_t ending;
  sigemptyset(&ending);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&ending, sig);
  sigprocmask(SIG_UNBLOCK, &ending, nullptr);
}

std::vector<std::string> environment_with(const std::vector<std::string>& overrides,
                                          bool (*drop)(std::string_view entry)) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (drop == nullptr || !drop(*entry)) env.emplace_back(*entry);
  }
  for (const auto& entry : overrides) {
    const std::string name = entry.substr(0, entry.find('=') + 1);
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(name); });
    env.push_back(entry);
  }
  return env;
}

ChildProcess spawn_local(const SpawnSpec& spec) {
  ChildPipes pipes{.exec_error = make_pipe()};
  if (spec.stdin_mode == StdinMode::pipe) pipes.in = make_pipe();
  if (spec.capture_output) {
    pipes.out = make_pipe();
    pipes.err = make_pipe();
  }
  auto argv = c_strings(spec.argv);
  auto envp = c_strings(spec.environment);
  const pid_t launcher = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
  if (pid == 0) become_rank(spec, launcher, pipes, argv.data(), envp.data());

  setpgid(pid, pid);  // also from the parent, so the group exists before we signal it
  for (Pipe* pipe : {&pipes.out, &pipes.err, &pipes.exec_error}) close_fd(pipe->write_end);
  close_fd(pipes.in.read_end);
  int code = 0;
  const ssize_t got = read(pipes.exec_error.read_end, &code, sizeof code);
  close_fd(pipes.exec_error.read_end);
  if (got == sizeof code) {
    for (int* fd : {&pipes.out.read_end, &pipes.err.read_end, &pipes.in.write_end}) close_fd(*fd);
    if (code < 0) {
      throw std::runtime_error("cannot bind '" + spec.argv[0] + "' to CPUs " + cpu_list(spec.cpus) +
                               ": " + strerror(-code));
    }
    throw std::runtime_error("cannot start '" + spec.argv[0] + "'" +
                             (spec.cwd.empty() ? "" : " in '" + spec.cwd + "'") + ": " +
                             strerror(code));
  }
  return {pid, pipes.out.read_end, pipes.err.read_end, pipes.in.write_end};
}

}  // namespace rlx::launcher
