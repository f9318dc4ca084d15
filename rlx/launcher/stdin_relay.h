// Copies rlxrun's stdin to a remote rank 0 (through its ssh's stdin) without
// ever blocking the launcher: a rank that does not read its stdin must not
// stall output relaying or teardown.
#pragma once

#include <string>

#include <poll.h>

namespace rlx::launcher {

class StdinRelay {
 public:
  StdinRelay() = default;
  ~StdinRelay() { close_target(); }
  StdinRelay(const StdinRelay&) = delete;
  StdinRelay& operator=(const StdinRelay&) = delete;

  // Starts relaying into `target_fd` (which this object owns and closes).
  void start(int target_fd);
  bool active() const { return target_fd_ >= 0; }

  // The pollfd to wait on: our stdin for more input, or the target for room.
  pollfd wanted() const;
  // Call when wanted() reported an event.
  void on_ready(short revents);
  void close_target();

 private:
  int target_fd_ = -1;
  std::string pending_;
};

}  // namespace rlx::launcher
