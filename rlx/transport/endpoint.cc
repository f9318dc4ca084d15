#include "rlx/transport/endpoint.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

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

[[noreturn]] void bad_endpoint(std::string_view text, std::string_view what, std::string_view why) {
  throw CollectiveError(ErrorKind::invalid_argument, {.operation = "parse " + std::string(what)},
                        "'" + excerpt(text) + "' " + std::string(why),
                        "write host:port, [ipv6]:port or name:port, with a port from 1 to 65535");
}

}  // namespace

std::optional<std::string> configured_address(const launch_env::LaunchEnv& env) {
  if (!env.host_address.empty()) return env.host_address;
  if (!env.ifname.empty()) return interface_address(env.ifname);
  return std::nullopt;
}

std::string HostPort::to_string() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

HostPort parse_host_port(std::string_view text, std::string_view what) {
  std::string_view host, port_text;
  if (text.starts_with("[")) {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      bad_endpoint(text, what, "has an unterminated [ipv6] address or no :port after it");
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) bad_endpoint(text, what, "has no :port");
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      bad_endpoint(text, what, "looks like an IPv6 address without [brackets]");
    }
  }
  if (host.empty()) bad_endpoint(text, what, "has an empty host");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    bad_endpoint(text, what, "has an invalid port");
  }
  return {std::string(host), static_cast<std::uint16_t>(port)};
}

std::string interface_address(std::string_view ifname, bool prefer_ipv6) {
  ifaddrs* raw = nullptr;
  if (getifaddrs(&raw) != 0) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "find interface"},
                          "getifaddrs failed");
  }
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> list(raw, freeifaddrs);
  std::string v4, v6;
  std::set<std::string> names;
  for (ifaddrs* a = raw; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    names.insert(a->ifa_name);
    if (ifname != a->ifa_name) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET && v4.empty()) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      v4 = inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
    } else if (a->ifa_addr->sa_family == AF_INET6 && v6.empty()) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope id: skip
      v6 = inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
    }
  }
  if (prefer_ipv6 ? !v6.empty() : v4.empty() && !v6.empty()) return v6;
  if (!v4.empty()) return v4;
  std::string known;
  for (const auto& name : names) known += (known.empty() ? "" : ", ") + name;
  throw CollectiveError(ErrorKind::invalid_argument, {.operation = "find interface"},
                        "interface '" + std::string(ifname) + "' has no usable address",
                        "RLX_IFNAME / --ifname must name one of: " + known);
}

std::string source_address_towards(const std::string& host) {
  auto fail = [&host](const std::string& why) -> std::string {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "route to " + host}, why,
                          "check the host name, or choose the interface with --ifname");
  };
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* raw = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), "9", &hints, &raw); rc != 0) {
    return fail("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(raw, freeaddrinfo);
  // Connecting a UDP socket sends nothing; it only asks the kernel for a route.
  const int fd = socket(raw->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(std::string("socket: ") + strerror(errno));
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  const bool routed = connect(fd, raw->ai_addr, raw->ai_addrlen) == 0 &&
                      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
  const int error = errno;
  close(fd);
  if (!routed) return fail("no route to '" + host + "': " + strerror(error));
  char text[INET6_ADDRSTRLEN] = {};
  if (local.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr, text, sizeof text);
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&local)->sin_addr, text, sizeof text);
  }
  return text;
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
  ifaddrs* raw = nullptr;
  if (::getifaddrs(&raw) != 0) return false;
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> list(raw, freeifaddrs);
  for (const ifaddrs* a = raw; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    sockaddr_storage address{};
    std::memcpy(&address, a->ifa_addr,
                family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    if (ip_bytes(address) == target) return true;
  }
  return false;
}

namespace {

// A numeric IPv4 or IPv6 address as a sockaddr, or nothing for a name.
std::optional<sockaddr_storage> numeric(const std::string& numeric_address) {
  sockaddr_storage address{};
  auto& v4 = reinterpret_cast<sockaddr_in&>(address);
  auto& v6 = reinterpret_cast<sockaddr_in6&>(address);
  if (inet_pton(AF_INET, numeric_address.c_str(), &v4.sin_addr) == 1) {
    address.ss_family = AF_INET;
  } else if (inet_pton(AF_INET6, numeric_address.c_str(), &v6.sin6_addr) == 1) {
    address.ss_family = AF_INET6;
  } else {
    return std::nullopt;
  }
  return address;
}

}  // namespace

bool is_this_host(const std::string& numeric_address) {
  const auto address = numeric(numeric_address);
  return address && is_this_host(*address);
}

bool is_loopback_address(const std::string& numeric_address) {
  const auto address = numeric(numeric_address);
  if (!address) return false;
  const auto bytes = ip_bytes(*address);
  return bytes && is_loopback(*bytes);
}

std::string listen_address_for(const std::string& advertised, bool chosen) {
  if (is_loopback_address(advertised) || (chosen && is_this_host(advertised))) return advertised;
  return advertised.find(':') != std::string::npos ? "::" : "0.0.0.0";
}

std::optional<std::uint16_t> unused_port(const std::string& numeric_address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
  addrinfo* found = nullptr;
  if (getaddrinfo(numeric_address.c_str(), "0", &hints, &found) != 0) return std::nullopt;
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

}  // namespace rlx
