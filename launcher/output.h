// Copies a rank's output to the launcher's, line by line, tagged with the rank.
#pragma once

#include <span>
#include <string>

namespace rlx::launcher {

class TaggedOutput {
 public:
  // Writes to `sink_fd` (the launcher's stdout or stderr) and, when
  // `copy_fd` >= 0, an untagged copy to that file (which this object closes).
  TaggedOutput(int rank, bool tag, int sink_fd, int copy_fd);
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
  int sink_fd_;
  int copy_fd_;
  std::string pending_;
};

// write() all of `bytes`, retrying on EINTR; gives up silently on other errors
// (a closed terminal must not stop the job).
void write_all(int fd, std::string_view bytes);

}  // namespace rlx::launcher
