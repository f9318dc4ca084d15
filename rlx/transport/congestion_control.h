// Which TCP congestion control rlx's streams run (RLX_TCP_CONGESTION).
//
// A connection between two ranks of one host never leaves the kernel: there
// is no bottleneck to probe and nothing to be fair to. A pacing algorithm
// (BBR, the default of many cloud images and of this project's development
// VM) still paces it, through a timer per burst, and on the development VM
// that at times cut a 2-rank 16 MiB all_sum to half its speed or less
// (docs/BENCHMARKS.md, "Congestion control on one host"). So by default
// rlx's same-host connections use reno, which never paces (and which every
// unprivileged process may choose); connections to other hosts keep the
// system's algorithm, which the administrator chose for that network.
#pragma once

#include <string>
#include <string_view>

#include "rlx/transport/errors.h"

struct sockaddr_storage;

namespace rlx {

// The algorithm has to be chosen before a connection is established: a
// socket switched away from BBR after its handshake stayed as slow as BBR
// (BBR asks the kernel for pacing when it starts, and the switch seems not
// to undo that; docs/BENCHMARKS.md). So the connector sets it before connect(), and the listener
// on its listening socket, whose accepted connections inherit it.
class CongestionControl {
 public:
  // The setting's values: "auto" (or empty), "system" (never change the
  // system's choice), or an algorithm's name for every connection ("cubic",
  // "bbr", ...). A named algorithm the kernel refuses (not loaded, or not in
  // net.ipv4.tcp_allowed_congestion_control for an unprivileged process)
  // throws CollectiveError(invalid_argument) naming it and what to check.
  static CongestionControl from_setting(std::string_view setting, ErrorSite site = {});

  // On a socket about to connect to `destination`.
  void before_connect(int fd, const sockaddr_storage& destination) const;
  // On a socket about to listen: what every accepted connection starts with.
  void before_listen(int fd) const;
  // On an accepted connection: one from another host gets the system's
  // algorithm back when the listener's was only meant for this host.
  void after_accept(int fd) const;

 private:
  enum class Mode { automatic, system, named };
  Mode mode_ = Mode::automatic;
  std::string name_;            // Mode::named
  std::string system_default_;  // what a new socket runs here
};

// The congestion control a TCP socket runs, as the kernel names it.
std::string congestion_control_of(int fd);
// What a new TCP socket runs here (net.ipv4.tcp_congestion_control).
std::string system_congestion_control();

}  // namespace rlx
