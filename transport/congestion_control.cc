#include "transport/congestion_control.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>

#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "transport/socket_io.h"

namespace rlx {
namespace {

// Never paces, and the kernel lets every process choose it.
constexpr const char* kSameHostAlgorithm = "reno";

using Address16 = std::array<unsigned char, 16>;

// The address as IPv6 bytes (IPv4 as v4-mapped), or nothing for other families.
std::optional<Address16> ip_bytes(const sockaddr_storage& address) {
  Address16 out{};
  if (address.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(address);
    out[10] = out[11] = 0xff;
    std::memcpy(out.data() + 12, &v4.sin_addr, 4);
    return out;
  }
  if (address.ss_family == AF_INET6) {
    std::memcpy(out.data(), &reinterpret_cast<const sockaddr_in6&>(address).sin6_addr, 16);
    return out;
  }
  return std::nullopt;
}

bool is_loopback(const Address16& a) {
  static constexpr Address16 kV6Loopback{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  static constexpr unsigned char kV4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const bool v4_mapped = std::memcmp(a.data(), kV4MappedPrefix, 12) == 0;
  return a == kV6Loopback || (v4_mapped && a[12] == 127);
}

bool set_algorithm(int fd, const std::string& name) {
  return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                      static_cast<socklen_t>(name.size())) == 0;
}

// Whether the kernel lets this process run `name`, tried on a fresh socket.
int refusal_of(const std::string& name) {
  const UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe) return errno;
  return set_algorithm(probe.get(), name) ? 0 : errno;
}

}  // namespace

CongestionControl CongestionControl::from_setting(std::string_view setting, ErrorSite site) {
  CongestionControl choice;
  {
    const UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    choice.system_default_ = congestion_control_of(probe.get());
  }
  if (setting.empty() || setting == "auto") return choice;
  if (setting == "system") {
    choice.mode_ = Mode::system;
    return choice;
  }
  choice.mode_ = Mode::named;
  choice.name_ = std::string(setting);
  if (const int error = refusal_of(choice.name_); error != 0) {
    throw CollectiveError(
        ErrorKind::invalid_argument, std::move(site),
        "RLX_TCP_CONGESTION='" + choice.name_ + "': the kernel refuses it (" +
            std::strerror(error) + ")",
        "net.ipv4.tcp_available_congestion_control lists the loaded algorithms and "
        "net.ipv4.tcp_allowed_congestion_control those an unprivileged process may choose; "
        "'auto' or 'system' need neither");
  }
  return choice;
}

void CongestionControl::before_connect(int fd, const sockaddr_storage& destination) const {
  if (mode_ == Mode::named) set_algorithm(fd, name_);
  if (mode_ == Mode::automatic && is_this_host(destination)) set_algorithm(fd, kSameHostAlgorithm);
}

void CongestionControl::before_listen(int fd) const {
  if (mode_ == Mode::named) set_algorithm(fd, name_);
  if (mode_ == Mode::automatic) set_algorithm(fd, kSameHostAlgorithm);
}

void CongestionControl::after_accept(int fd) const {
  if (mode_ == Mode::automatic && !system_default_.empty() && !same_host(fd)) {
    set_algorithm(fd, system_default_);
  }
}

bool same_host(const sockaddr_storage& local, const sockaddr_storage& peer) {
  const auto mine = ip_bytes(local);
  const auto theirs = ip_bytes(peer);
  if (!mine || !theirs) return false;
  return is_loopback(*theirs) || *mine == *theirs;
}

bool same_host(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof local, peer_len = sizeof peer;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  return same_host(local, peer);
}

bool is_this_host(const sockaddr_storage& destination) {
  const auto target = ip_bytes(destination);
  if (!target) return false;
  if (is_loopback(*target)) return true;
  ifaddrs* interfaces = nullptr;
  if (::getifaddrs(&interfaces) != 0) return false;
  bool found = false;
  for (const ifaddrs* i = interfaces; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    sockaddr_storage address{};
    const std::size_t size =
        i->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
    std::memcpy(&address, i->ifa_addr, size);
    found = ip_bytes(address) == target;
  }
  ::freeifaddrs(interfaces);
  return found;
}

std::string congestion_control_of(int fd) {
  char name[32] = {};
  socklen_t len = sizeof name;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return {};
  return std::string(name, ::strnlen(name, len));
}

}  // namespace rlx
