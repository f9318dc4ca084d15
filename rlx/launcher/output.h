// Copies a rank's output to the launcher's, line by line, tagged with the
// rank (and the time); and the one line rlxrun keeps updating on a terminal.
#pragma once

#include <span>
#include <string>

namespace rlx::launcher {

// The line rlxrun rewrites in place on a terminal (the start progress), on
// stderr. Rank output clears it first, so the two never share a line; its
// owner shows it again later.
class StatusLine {
 public:
  explicit StatusLine(bool on_terminal) : on_terminal_(on_terminal) {}
  bool on_terminal() const { return on_terminal_; }
  // Replaces the line with `text` (on a terminal; elsewhere a line each).
  void show(std::string_view text);
  // Ends the line with `text`: it stays, and the next output starts below.
  void finish(std::string_view text);
  // Erases the line if it is shown.
  void clear();
  bool shown() const { return shown_; }

 private:
  const bool on_terminal_;
  bool shown_ = false;
};

struct LinePrefix {
  bool rank = true;   // "[3] "
  bool time = false;  // "2026-11-27 03:30:00.123 ", before the rank
};

class TaggedOutput {
 public:
  // Writes to `sink_fd` (the launcher's stdout or stderr) and, when
  // `copy_fd` >= 0, an untagged copy to that file (which this object closes).
  // `status`, if given, is cleared before each line.
  TaggedOutput(int rank, LinePrefix prefix, int sink_fd, int copy_fd, StatusLine* status = nullptr);
  ~TaggedOutput();
  TaggedOutput(const TaggedOutput&) = delete;
  TaggedOutput& operator=(const TaggedOutput&) = delete;

  // Emits every complete line in `bytes`, keeping a trailing partial line.
  void feed(std::span<const char> bytes);
  // Emits the partial line, if any (at end of stream).
  void finish();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  bool time_;
  StatusLine* status_;
  int sink_fd_;
  int copy_fd_;
  std::string pending_;
};

// write() all of `bytes`, retrying on EINTR; gives up silently on other errors
// (a closed terminal must not stop the job).
void write_all(int fd, std::string_view bytes);

}  // namespace rlx::launcher
