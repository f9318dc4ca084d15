// Network endpoints as people write them: "host:port", "10.0.0.2:4000",
// "[::1]:4000", "node07:4000".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "rlx/transport/launch_env.h"

struct sockaddr_storage;

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
// The address the settings give this rank to listen on and be reached at:
// RLX_HOST_ADDRESS, else RLX_IFNAME's address; none when neither is set.
std::optional<std::string> configured_address(const launch_env::LaunchEnv& env);

// The address of this machine that the kernel would send from to reach `host`
// (a name or an address): what a peer there can connect back to. Throws
// CollectiveError (invalid_argument) when `host` does not resolve or is not
// routable from here.
std::string source_address_towards(const std::string& host);

// True when both ends of a connection are on this host: the peer's address
// is a loopback address or the local address itself (the kernel routes it
// over the loopback device either way).
bool same_host(const sockaddr_storage& local, const sockaddr_storage& peer);
bool same_host(int fd);

// True when a connection to `destination` would not leave this host: a
// loopback address or an address of one of its interfaces. The string form
// takes a numeric IPv4 or IPv6 address (false for names).
bool is_this_host(const sockaddr_storage& destination);
bool is_this_host(const std::string& numeric_address);

// True for a numeric loopback address (127.0.0.0/8, ::1); false for names.
bool is_loopback_address(const std::string& numeric_address);

// The address a socket that is reached at `advertised` listens on: that
// address itself when it is a loopback one (nothing outside needs to reach
// it), or when it was `chosen` (RLX_HOST_ADDRESS, RLX_IFNAME, MASTER_ADDR)
// and belongs to this host; otherwise every address of its family ("0.0.0.0"
// or "::"), since names, and addresses of other hosts (NAT), bind nowhere.
std::string listen_address_for(const std::string& advertised, bool chosen);

// A TCP port nothing listens on at `numeric_address` now ("0.0.0.0" or "::"
// for every address of a family): the kernel's pick for a socket bound to
// port 0, released at once. Another process may take it before the caller
// binds it, as with torchrun's own pick. Empty when the address binds nowhere.
std::optional<std::uint16_t> unused_port(const std::string& numeric_address);

}  // namespace rlx
