#include "tests/support/local_net.h"

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "rlx/transport/endpoint.h"

namespace rlx::testing {

std::uint16_t free_port(int family) {
  const std::string any = family == AF_INET6 ? "::" : "0.0.0.0";
  const auto port = unused_port(any);
  if (!port) throw std::runtime_error("free_port: no socket binds to " + any + " on this host");
  return *port;
}

std::vector<std::string> listening_sockets_matching(const std::string& needle) {
  std::vector<std::string> found;
  std::FILE* ss = ::popen("ss -Hltnp 2>/dev/null", "r");
  if (ss == nullptr) return found;
  char line[1024];
  while (std::fgets(line, sizeof line, ss) != nullptr) {
    if (std::strstr(line, needle.c_str()) != nullptr) found.emplace_back(line);
  }
  ::pclose(ss);
  return found;
}

}  // namespace rlx::testing
