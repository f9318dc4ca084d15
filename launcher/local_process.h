// Starting one rank as a local child process.
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

namespace rlx::launcher {

struct SpawnSpec {
  std::vector<std::string> argv;         // argv[0] is looked up in PATH when it has no '/'
  std::vector<std::string> environment;  // the complete environment, "NAME=VALUE"
  std::string cwd;                       // empty: the launcher's own
  bool inherit_stdin = false;            // otherwise stdin is /dev/null
};

struct ChildProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends of the child's stdout and stderr
  int stderr_fd = -1;
};

// Forks and execs. The child leads its own process group (so the launcher can
// signal everything it started), dies with SIGKILL if the launcher dies, and
// starts with an empty signal mask. Throws std::runtime_error saying why the
// program could not be started (for example "No such file or directory").
ChildProcess spawn_local(const SpawnSpec& spec);

}  // namespace rlx::launcher
