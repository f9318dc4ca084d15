#include "rlx/transport/congestion_control.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "rlx/transport/endpoint.h"
#include "rlx/transport/socket_io.h"

namespace rlx {
namespace {

// Never paces, and the kernel lets every process choose it.
constexpr const char* kSameHostAlgorithm = "reno";

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
  choice.system_default_ = system_congestion_control();
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

std::string system_congestion_control() {
  const UniqueFd fresh(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return congestion_control_of(fresh.get());
}

std::string congestion_control_of(int fd) {
  char name[32] = {};
  socklen_t len = sizeof name;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return {};
  return std::string(name, ::strnlen(name, len));
}

}  // namespace rlx
