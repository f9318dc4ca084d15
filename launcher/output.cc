#include "launcher/output.h"

#include <cerrno>

#include <unistd.h>

namespace rlx::launcher {
namespace {

// A rank that prints without newlines is still shown, in pieces of this size.
constexpr std::size_t kMaxPendingLine = 64 * 1024;

}  // namespace

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

TaggedOutput::TaggedOutput(int rank, bool tag, int sink_fd, int copy_fd)
    : prefix_(tag ? "[" + std::to_string(rank) + "] " : ""), sink_fd_(sink_fd), copy_fd_(copy_fd) {}

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
  // One write per line keeps lines of different ranks from interleaving.
  write_all(sink_fd_, prefix_.empty() ? std::string(line) : prefix_ + std::string(line));
  if (copy_fd_ >= 0) write_all(copy_fd_, line);
}

}  // namespace rlx::launcher
