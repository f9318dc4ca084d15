// Starting one rank as a local child process.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace rlx::launcher {

enum class StdinMode {
  null,     // /dev/null
  inherit,  // the launcher's own stdin
  pipe,     // a pipe whose write end the caller gets (ChildProcess::stdin_fd)
};

struct SpawnSpec {
  std::vector<std::string> argv;         // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> environment;  // the complete environment, "NAME=VALUE"
  std::string cwd;                       // empty: the launcher's own
  StdinMode stdin_mode = StdinMode::null;
  bool capture_output = true;  // otherwise the child writes to our stdout and stderr
  std::vector<int> cpus;       // the CPUs it may run on (binding.h); empty: all of ours
};

struct ChildProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends of the child's stdout and stderr, when captured
  int stderr_fd = -1;
  int stdin_fd = -1;  // write end of the child's stdin, with StdinMode::pipe
};

// This process's environment less the entries `drop` selects (none when
// null), with `overrides` ("NAME=VALUE") laid over it: later entries win.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides,
                                          bool (*drop)(std::string_view entry) = nullptr);

// Blocks SIGCHLD, SIGINT, SIGTERM and SIGHUP, ignores SIGPIPE, and returns a
// non-blocking signalfd that reports the blocked ones: how the launcher and
// its remote agent wait for children and for being told to stop. Children
// started by spawn_local unblock them again. Throws std::runtime_error.
int watch_process_signals();
// Gives SIGINT, SIGTERM and SIGHUP their default action again.
void stop_watching_process_signals();

// Forks and execs. The child leads its own process group (so the launcher can
// signal everything it started), dies with SIGKILL if the launcher dies, and
// starts with an empty signal mask. Throws std::runtime_error saying why the
// program could not be started (for example "No such file or directory").
ChildProcess spawn_local(const SpawnSpec& spec);

}  // namespace rlx::launcher
