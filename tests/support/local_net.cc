#include "tests/support/local_net.h"

#include <cstdio>
#include <cstring>

#include <netinet/in.h>
#include <unistd.h>

namespace rlx::testing {

std::uint16_t free_port(int family) {
  const int fd = ::socket(family, SOCK_STREAM, 0);
  sockaddr_storage address{};
  socklen_t length = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  address.ss_family = static_cast<sa_family_t>(family);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), length);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                  : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
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
