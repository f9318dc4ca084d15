#include "rlx/launcher/master_endpoint.h"

#include <cstdint>
#include <optional>

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace rlx::launcher {
namespace {

// A TCP port nothing listens on at `address` (numeric) now: the kernel's
// choice for a socket bound to port 0, which torch's store binds moments
// later (as torchrun's own free-port pick does).
std::optional<std::uint16_t> unused_port(const std::string& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(address.c_str(), "0", &hints, &found) != 0) return std::nullopt;
  std::optional<std::uint16_t> port;
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  if (fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
    port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return port;
}

}  // namespace

MasterEndpoint master_endpoint(const Placement& rank0, const std::string& rendezvous_address) {
  constexpr std::uint16_t kTorchrunDefaultPort = 29500;
  if (!is_local_host(rank0.host)) {
    return {rank0.address.empty() ? rank0.host : rank0.address,
            std::to_string(kTorchrunDefaultPort)};
  }
  const std::string address = rank0.address.empty() ? rendezvous_address : rank0.address;
  return {address, std::to_string(unused_port(address).value_or(kTorchrunDefaultPort))};
}

}  // namespace rlx::launcher
