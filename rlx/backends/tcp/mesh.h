// Building the full mesh of authenticated connections between ranks.
//
// Between every pair of ranks there are 1 + lanes connections: connection 0
// carries point-to-point messages, 1..lanes carry collective steps. The higher
// rank connects; the lower rank's Listener accepts. Every connection starts
// with the handshake of handshake.h.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rlx/transport/congestion_control.h"
#include "rlx/transport/endpoint.h"
#include "rlx/transport/socket_io.h"

namespace boost::asio {
class io_context;
}

namespace rlx::tcp {

struct MeshSpec {
  int rank = 0;
  int world_size = 1;
  int lanes = 1;
  std::string token;
  CongestionControl congestion;  // applied to both ends of every connection
};

// Accepts connections on the progress thread (the io_context's). Connections
// that fail the handshake, or that nobody expects (strangers, duplicates,
// latecomers), are logged once and closed; the job goes on.
class Listener {
 public:
  // Listens on bind_host:port (port 0: ephemeral). Throws CollectiveError.
  Listener(boost::asio::io_context& io, const std::string& bind_host, std::uint16_t port,
           MeshSpec spec);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  std::uint16_t port() const;
  // Waits for every connection from the ranks above this one. Returns them as
  // [peer][connection]; entries for ranks at or below this one are empty.
  // Throws CollectiveError (timeout) naming the ranks that never connected,
  // or what `watch` throws (it is called every few milliseconds).
  std::vector<std::vector<UniqueFd>> wait_for_peers(Deadline deadline,
                                                    const std::function<void()>& watch = {});

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// Connects to rank `peer` at `address` as connection `index` and runs the
// connector's side of the handshake. Throws CollectiveError, or what `watch`
// throws (called every 10 ms while the peer refuses connections).
UniqueFd connect_to_peer(const HostPort& address, int peer, int index, const MeshSpec& spec,
                         Deadline deadline, const std::function<void()>& watch = {});

}  // namespace rlx::tcp
