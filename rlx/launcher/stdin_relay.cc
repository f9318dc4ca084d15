#include "rlx/launcher/stdin_relay.h"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

namespace rlx::launcher {

void StdinRelay::start(int target_fd) {
  target_fd_ = target_fd;
  fcntl(target_fd_, F_SETFL, fcntl(target_fd_, F_GETFL) | O_NONBLOCK);
}

pollfd StdinRelay::wanted() const {
  if (!active()) return {-1, 0, 0};
  if (pending_.empty()) return {STDIN_FILENO, POLLIN, 0};
  return {target_fd_, POLLOUT, 0};
}

void StdinRelay::on_ready(short revents) {
  if (!active() || revents == 0) return;
  if (pending_.empty()) {
    char buffer[65536];
    const ssize_t n = read(STDIN_FILENO, buffer, sizeof buffer);
    if (n > 0) {
      pending_.assign(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      close_target();  // end of our stdin: the rank sees end of its own
    }
    return;
  }
  const ssize_t n = write(target_fd_, pending_.data(), pending_.size());
  if (n > 0) {
    pending_.erase(0, static_cast<std::size_t>(n));
  } else if (n < 0 && errno != EINTR && errno != EAGAIN) {
    close_target();  // the rank is gone or closed its stdin
  }
}

void StdinRelay::close_target() {
  if (target_fd_ >= 0) close(target_fd_);
  target_fd_ = -1;
  pending_.clear();
}

}  // namespace rlx::launcher
