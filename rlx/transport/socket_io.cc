#include "rlx/transport/socket_io.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rlx/transport/congestion_control.h"
#include "rlx/transport/errors.h"

namespace rlx {
namespace {

std::string errno_text(int code) { return std::strerror(code); }

bool transient(int code) { return code == EAGAIN || code == EWOULDBLOCK || code == EINTR; }

// Kernel socket buffers big enough that a ring step's chunks stream without stalls.
constexpr int kSocketBufferBytes = 4 << 20;

}  // namespace

void UniqueFd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int ms_until(Deadline deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<long long>(left.count(), 0, 1 << 30));
}

void wait_ready(int fd, short events, Deadline deadline, int wake_fd) {
  for (;;) {
    pollfd fds[2] = {{fd, events, 0}, {wake_fd, POLLIN, 0}};
    const int n = ::poll(fds, wake_fd >= 0 ? 2 : 1, ms_until(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(IoError::Kind::failed, "poll: " + errno_text(errno));
    if (wake_fd >= 0 && fds[1].revents != 0) throw IoError(IoError::Kind::woken, "woken");
    if (n > 0) return;  // ready, or an error condition the next call reports
    if (Clock::now() >= deadline) throw IoError(IoError::Kind::timeout, "deadline passed");
  }
}

void send_all(int fd, std::span<const std::span<const std::byte>> parts, Deadline deadline,
              int wake_fd) {
  constexpr std::size_t kMaxParts = 8;
  iovec iov[kMaxParts];
  std::size_t count = 0;
  for (auto part : parts) {
    if (part.empty()) continue;
    if (count == kMaxParts) throw IoError(IoError::Kind::failed, "too many parts");
    iov[count++] = {const_cast<std::byte*>(part.data()), part.size()};
  }
  std::size_t first = 0;
  while (first < count) {
    msghdr message{};
    message.msg_iov = iov + first;
    message.msg_iovlen = count - first;
    // MSG_NOSIGNAL: a vanished peer is an error to report, not a SIGPIPE that kills us.
    const ssize_t n = ::sendmsg(fd, &message, MSG_NOSIGNAL);
    if (n < 0 && transient(errno)) {
      wait_ready(fd, POLLOUT, deadline, wake_fd);
      continue;
    }
    if (n < 0) {
      const auto kind =
          (errno == EPIPE || errno == ECONNRESET) ? IoError::Kind::closed : IoError::Kind::failed;
      throw IoError(kind, "send: " + errno_text(errno));
    }
    for (auto left = static_cast<std::size_t>(n); left > 0 && first < count;) {
      const std::size_t used = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + used;
      iov[first].iov_len -= used;
      left -= used;
      if (iov[first].iov_len == 0) ++first;
    }
  }
}

void send_all(int fd, std::span<const std::byte> bytes, Deadline deadline, int wake_fd) {
  const std::span<const std::byte> parts[] = {bytes};
  send_all(fd, parts, deadline, wake_fd);
}

void recv_exact(int fd, std::span<std::byte> into, Deadline deadline, int wake_fd) {
  std::size_t got = 0;
  while (got < into.size()) {
    const ssize_t n = ::recv(fd, into.data() + got, into.size() - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
    } else if (n == 0) {
      throw IoError(IoError::Kind::closed, "the peer closed the connection");
    } else if (transient(errno)) {
      wait_ready(fd, POLLIN, deadline, wake_fd);
    } else {
      const auto kind = errno == ECONNRESET ? IoError::Kind::closed : IoError::Kind::failed;
      throw IoError(kind, "recv: " + errno_text(errno));
    }
  }
}

void configure_stream(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBufferBytes, sizeof kSocketBufferBytes);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kSocketBufferBytes, sizeof kSocketBufferBytes);
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

std::string local_host(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  } else {
    const auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], text, sizeof text);
    } else {
      inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    }
  }
  return text;
}

namespace {

// One non-blocking connect attempt to one address; returns the errno on failure.
int try_connect(const addrinfo& ai, Deadline deadline, const CongestionControl* congestion,
                UniqueFd& out) {
  UniqueFd fd(
      ::socket(ai.ai_family, ai.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai.ai_protocol));
  if (!fd) return errno;
  if (congestion != nullptr) {
    sockaddr_storage destination{};
    std::memcpy(&destination, ai.ai_addr, std::min<std::size_t>(ai.ai_addrlen, sizeof destination));
    congestion->before_connect(fd.get(), destination);
  }
  if (::connect(fd.get(), ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno;
    try {
      wait_ready(fd.get(), POLLOUT, deadline);
    } catch (const IoError&) {
      return ETIMEDOUT;
    }
    int error = 0;
    socklen_t len = sizeof error;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len);
    if (error != 0) return error;
  }
  configure_stream(fd.get());
  out = std::move(fd);
  return 0;
}

}  // namespace

UniqueFd connect_with_retry(const HostPort& target, Deadline deadline,
                            const CongestionControl* congestion,
                            const std::function<void()>& watch) {
  auto pause = std::chrono::milliseconds(10);
  std::string last_error = "no attempt made";
  do {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* raw = nullptr;
    const int rc =
        ::getaddrinfo(target.host.c_str(), std::to_string(target.port).c_str(), &hints, &raw);
    if (rc != 0) {
      last_error = std::string("cannot resolve host: ") + gai_strerror(rc);
    } else {
      std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(raw, freeaddrinfo);
      for (addrinfo* ai = raw; ai != nullptr; ai = ai->ai_next) {
        UniqueFd fd;
        const int error = try_connect(*ai, deadline, congestion, fd);
        if (error == 0) return fd;
        if (is_out_of_descriptors(error)) {
          throw IoError(IoError::Kind::out_of_descriptors, "socket: " + errno_text(error), error);
        }
        last_error = errno_text(error);
      }
    }
    const auto now = Clock::now();
    if (now >= deadline) break;
    const Deadline resume = std::min<Deadline>(now + pause, deadline);
    for (auto left = resume - now; left > Clock::duration::zero(); left = resume - Clock::now()) {
      if (watch) watch();
      std::this_thread::sleep_for(
          watch ? std::min<Clock::duration>(left, std::chrono::milliseconds(10)) : left);
    }
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  } while (Clock::now() < deadline);
  throw IoError(IoError::Kind::timeout, "could not connect to " + target.to_string() +
                                            " before the deadline (last error: " + last_error +
                                            ")");
}

}  // namespace rlx
