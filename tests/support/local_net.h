// What tests ask of this host's network: a port to give a launcher, and who
// listens where.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <sys/socket.h>

namespace rlx::testing {

// A port of `family` (AF_INET or AF_INET6) that was free a moment ago: bound
// on the wildcard address, then released.
std::uint16_t free_port(int family = AF_INET);

// The lines of `ss -Hltnp` (listening TCP sockets, with their processes)
// that contain `needle`: ",pid=123," for one process, "\"prog\"" for a
// program's. Other tests' processes may listen meanwhile.
std::vector<std::string> listening_sockets_matching(const std::string& needle);

}  // namespace rlx::testing
