// Network endpoints as people write them: "host:port", "10.0.0.2:4000",
// "[::1]:4000", "node07:4000".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rlx {

struct HostPort {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  std::uint16_t port = 0;

  // "host:port", with brackets around IPv6 addresses.
  std::string to_string() const;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// Parses "host:port" / "[v6]:port". `what` names the setting in the error
// (for example "RLX_COORDINATOR"). Throws CollectiveError (invalid_argument).
HostPort parse_host_port(std::string_view text, std::string_view what);

// The first address of interface `ifname` (IPv4 preferred unless `prefer_ipv6`).
// Throws CollectiveError (invalid_argument) naming the interfaces that exist.
std::string interface_address(std::string_view ifname, bool prefer_ipv6 = false);

// The address of this machine that the kernel would send from to reach `host`
// (a name or an address): what a peer there can connect back to. Throws
// CollectiveError (invalid_argument) when `host` does not resolve or is not
// routable from here.
std::string source_address_towards(const std::string& host);

}  // namespace rlx
