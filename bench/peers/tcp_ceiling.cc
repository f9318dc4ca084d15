// The ceiling for any two-rank TCP all-reduce on this machine: two processes
// that only move bytes. Each "all_sum" of S bytes sends S bytes to the peer
// and receives S from it at the same time over one socket, which is what a
// two-rank ring moves (S/2 per step, two steps) without any arithmetic.
//
//   tcp-ceiling --listen PORT | --connect HOST:PORT   [sweep options]
#include <cstring>
#include <string>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "bench/sweep_driver.h"
#include "rlx/transport/congestion_control.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/socket_io.h"

namespace {

using namespace std::chrono_literals;

class RawTcpComm {
 public:
  static constexpr bool kMovesOnly = true;
  RawTcpComm(rlx::UniqueFd fd, int rank) : fd_(std::move(fd)), rank_(rank) {}
  int rank() { return rank_; }
  int size() { return 2; }
  void all_sum(float* data, std::size_t count) {
    exchange(reinterpret_cast<std::byte*>(data), count * sizeof(float));
  }
  void all_gather(const float*, float*, std::size_t) {}
  void barrier() {
    std::byte token{};
    exchange(&token, 1);
  }
  void send(int, const std::byte* data, std::size_t bytes) {
    rlx::send_all(fd_.get(), {data, bytes}, rlx::Clock::now() + 60s);
  }
  void recv(int, std::byte* data, std::size_t bytes) {
    rlx::recv_exact(fd_.get(), {data, bytes}, rlx::Clock::now() + 60s);
  }
  double max(double value) {
    double other = 0;
    send(0, reinterpret_cast<const std::byte*>(&value), sizeof value);
    recv(0, reinterpret_cast<std::byte*>(&other), sizeof other);
    return std::max(value, other);
  }

 private:
  // Full duplex: send `bytes` from data while receiving as many into scratch.
  void exchange(std::byte* data, std::size_t bytes) {
    if (incoming_.size() < bytes) incoming_.resize(bytes);
    std::size_t sent = 0, got = 0;
    while (sent < bytes || got < bytes) {
      if (sent < bytes) {
        const ssize_t n = ::send(fd_.get(), data + sent, bytes - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) sent += static_cast<std::size_t>(n);
      }
      if (got < bytes) {
        const ssize_t n = ::recv(fd_.get(), incoming_.data() + got, bytes - got, MSG_DONTWAIT);
        if (n > 0) got += static_cast<std::size_t>(n);
        if (n == 0) throw std::runtime_error("peer closed");
      }
      if (sent < bytes || got < bytes) {
        pollfd p{fd_.get(),
                 static_cast<short>((sent < bytes ? POLLOUT : 0) | (got < bytes ? POLLIN : 0)), 0};
        ::poll(&p, 1, 1000);
      }
    }
  }

  rlx::UniqueFd fd_;
  int rank_;
  std::vector<std::byte> incoming_;
};

rlx::UniqueFd accept_one(std::uint16_t port, const rlx::CongestionControl& congestion) {
  rlx::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  congestion.before_listen(listener.get());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener.get(), 1) != 0) {
    throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
  }
  rlx::UniqueFd fd(::accept(listener.get(), nullptr, nullptr));
  rlx::configure_stream(fd.get());
  congestion.after_accept(fd.get());
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: tcp-ceiling --listen PORT | --connect HOST:PORT [sweep options]\n");
    return 2;
  }
  const bool listen = std::string(argv[1]) == "--listen";
  // The congestion control of rlx's own streams (RLX_TCP_CONGESTION), so the ceiling stays one.
  const auto congestion = rlx::CongestionControl::from_setting(
      rlx::launch_env::from_process_environment().tcp_congestion);
  rlx::UniqueFd fd = listen ? accept_one(static_cast<std::uint16_t>(std::atoi(argv[2])), congestion)
                            : rlx::connect_with_retry(rlx::parse_host_port(argv[2], "--connect"),
                                                      rlx::Clock::now() + 30s, &congestion);
  argv[2] = argv[0];
  RawTcpComm comm(std::move(fd), listen ? 0 : 1);
  auto options = rlx::bench::parse_sweep_options(argc - 2, argv + 2, "tcp-ceiling");
  rlx::bench::Sweep<RawTcpComm>(comm, options).run();
  return 0;
}
