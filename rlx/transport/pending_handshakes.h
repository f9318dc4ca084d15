// How many accepted connections may be handshaking at once on one port.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

#include "rlx/transport/asio.h"

namespace rlx {

// Bounds the connections a port has accepted but not yet authenticated, so
// that strangers (a flood, or slow connections that never speak) cannot run a
// rank out of descriptors or memory. A rank's own peers answer within
// milliseconds; a connection pending for `grace` while the port is full is
// presumed hostile and evicted, oldest first, to make room. With no room and
// nobody old enough to evict, the accept loop pauses: new connections wait in
// the kernel's backlog, which costs this process nothing.
//
// Used from the io_context's one thread only.
class PendingHandshakes {
 public:
  using Ticket = std::uint64_t;
  using Clock = std::chrono::steady_clock;

  // The default limit: a quarter of this process's descriptor limit, between
  // 16 and 128.
  static std::size_t default_limit();

  explicit PendingHandshakes(boost::asio::any_io_executor executor,
                             std::size_t limit = default_limit(),
                             Clock::duration grace = std::chrono::seconds(1));

  // Runs `accept` (the next async_accept) now if there is room, making it by
  // evicting the oldest connection when that one is past its grace; otherwise
  // when there is room.
  void when_room(std::function<void()> accept);

  // An accepted connection starts its handshake. `evict` closes it; it is
  // called at most once, and then the ticket is already finished.
  Ticket admit(std::function<void()> evict);

  // The handshake ended, authenticated or refused. Finishing twice is harmless.
  void finished(Ticket ticket);

  std::size_t pending() const { return pending_.size(); }
  std::size_t limit() const { return limit_; }

 private:
  struct Connection {
    Clock::time_point since;
    std::function<void()> evict;
  };

  void resume_waiting_accept();

  std::size_t limit_;
  Clock::duration grace_;
  boost::asio::steady_timer timer_;
  std::map<Ticket, Connection> pending_;  // oldest first
  Ticket next_ticket_ = 0;
  std::function<void()> waiting_accept_;
};

}  // namespace rlx
