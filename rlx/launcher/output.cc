#include "rlx/launcher/output.h"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>

#include <unistd.h>

namespace rlx::launcher {
namespace {

// A rank that prints without newlines is still shown, in pieces of this size.
constexpr std::size_t kMaxPendingLine = 64 * 1024;

// "2026-11-27 03:30:00.123 ": local time, as mpirun's --timestamp-output.
std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm local{};
  localtime_r(&seconds, &local);
  char text[40];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(text + n, sizeof text - n, ".%03d ", static_cast<int>(millis));
  return text;
}

}  // namespace

void StatusLine::show(std::string_view text) {
  if (!on_terminal_) return write_all(STDERR_FILENO, std::string(text) + "\n");
  write_all(STDERR_FILENO, "\r" + std::string(text) + "\033[K");
  shown_ = true;
}

void StatusLine::finish(std::string_view text) {
  if (!on_terminal_) return write_all(STDERR_FILENO, std::string(text) + "\n");
  write_all(STDERR_FILENO, "\r" + std::string(text) + "\033[K\n");
  shown_ = false;
}

void StatusLine::clear() {
  if (!shown_) return;
  write_all(STDERR_FILENO, "\r\033[K");
  shown_ = false;
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

TaggedOutput::TaggedOutput(int rank, LinePrefix prefix, int sink_fd, int copy_fd,
                           StatusLine* status)
    : prefix_(prefix.rank ? "[" + std::to_string(rank) + "] " : ""),
      time_(prefix.time),
      status_(status),
      sink_fd_(sink_fd),
      copy_fd_(copy_fd) {}

TaggedOutput::~TaggedOutput() {
  if (copy_fd_ >= 0) close(copy_fd_);
}

void TaggedOutput::feed(std::span<const char> bytes) {
  pending_.append(bytes.data(), bytes.size());
  std::size_t start = 0;
  for (std::size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
    emit(std::string_view(pending_).substr(start, nl + 1 - start));
  }
  pending_.erase(0, start);
  if (pending_.size() >= kMaxPendingLine) {
    pending_ += '\n';
    emit(pending_);
    pending_.clear();
  }
}

void TaggedOutput::finish() {
  if (pending_.empty()) return;
  pending_ += '\n';
  emit(pending_);
  pending_.clear();
}

void TaggedOutput::emit(std::string_view line) {
  if (status_ != nullptr) status_->clear();
  // One write per line keeps lines of different ranks from interleaving.
  write_all(sink_fd_, (time_ ? timestamp() : std::string()) + prefix_ + std::string(line));
  if (copy_fd_ >= 0) write_all(copy_fd_, line);
}

}  // namespace rlx::launcher
