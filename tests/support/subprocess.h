// A child process for tests: started with pipes on its output, waited for
// with a deadline (killed if it passes), its output collected. Never hangs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <sys/types.h>

namespace rlx::testing {

struct Finished {
  int status = -1;  // as from waitpid
  std::string out, err;
  bool timed_out = false;
  int exit_code() const;  // 128 + signal for a signalled process
};

class Subprocess {
 public:
  // Starts argv (PATH lookup when argv[0] has no '/'), with this process's
  // environment plus `extra_env` ("NAME=VALUE").
  explicit Subprocess(const std::vector<std::string>& argv,
                      const std::vector<std::string>& extra_env = {});
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Reads output until `text` appears on stdout or stderr, or the limit; true if it did.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds limit);
  // Waits for exit; past the limit, kills it (SIGKILL) and marks timed_out.
  Finished wait(std::chrono::milliseconds limit);

 private:
  void pump(int timeout_ms);
  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  Finished result_;
  bool reaped_ = false;
};

// True while `pid` exists and is not a zombie.
bool process_alive(pid_t pid);

}  // namespace rlx::testing
