// Blocking-with-deadline socket primitives over plain file descriptors.
//
// Every wait here is a poll() bounded by a deadline, optionally also woken by
// a second descriptor (an eventfd a progress thread signals on failure). The
// caller turns the IoError into a CollectiveError with its own context.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "rlx/transport/endpoint.h"

namespace rlx {

class CongestionControl;

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// An owned file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset();

 private:
  int fd_ = -1;
};

class IoError : public std::runtime_error {
 public:
  // out_of_descriptors: no socket could be made (EMFILE, ENFILE), which
  // waiting does not cure; callers say so with out_of_descriptors() (errors.h).
  enum class Kind { timeout, closed, failed, woken, out_of_descriptors };
  IoError(Kind kind, const std::string& what, int error_number = 0)
      : std::runtime_error(what), kind_(kind), error_number_(error_number) {}
  Kind kind() const { return kind_; }
  int error_number() const { return error_number_; }  // errno, when one says why

 private:
  Kind kind_;
  int error_number_;
};

// Waits for `events` (POLLIN/POLLOUT) on fd. Throws IoError timeout at the
// deadline, woken when `wake_fd` becomes readable first.
void wait_ready(int fd, short events, Deadline deadline, int wake_fd = -1);

// Writes every byte of every part (one sendmsg per attempt), waiting as needed.
void send_all(int fd, std::span<const std::span<const std::byte>> parts, Deadline deadline,
              int wake_fd = -1);
void send_all(int fd, std::span<const std::byte> bytes, Deadline deadline, int wake_fd = -1);

// Reads exactly into.size() bytes. Throws IoError closed on end of stream.
void recv_exact(int fd, std::span<std::byte> into, Deadline deadline, int wake_fd = -1);

// Connects to the first address of `target` that accepts, retrying refused
// or unreachable attempts with growing pauses until the deadline, with the
// congestion control `congestion` chooses (the system's when null). Throws
// IoError timeout naming the address and the last error, or at once
// out_of_descriptors when no socket can be made. `watch`, when given, is
// called every 10 ms between attempts, and what it throws ends the retries.
UniqueFd connect_with_retry(const HostPort& target, Deadline deadline,
                            const CongestionControl* congestion = nullptr,
                            const std::function<void()>& watch = {});

// Non-blocking, TCP_NODELAY, large kernel buffers: the setup of every rlx stream.
void configure_stream(int fd);

// The local address of a connected socket, as a host string.
std::string local_host(int fd);

// Milliseconds from now to the deadline, at least 0 (for poll()).
int ms_until(Deadline deadline);

}  // namespace rlx
