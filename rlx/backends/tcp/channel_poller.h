// The progress thread's watch over a transport's point-to-point connections:
// one epoll set, waited on through the transport's io_context, in which each
// connection is armed for one readiness report at a time (EPOLLONESHOT). A
// receiver that reads a connection itself (PeerChannel::Pump) leaves it
// unarmed meanwhile, so the bytes it waits for wake no other thread.
#pragma once

#include <array>
#include <functional>
#include <memory>

#include <sys/epoll.h>

#include "rlx/transport/socket_io.h"

namespace boost::asio {
class io_context;
}

namespace rlx::tcp {

class ChannelPoller {
 public:
  // Called on the progress thread with the `who` of a connection that became
  // readable (or closed); it is unarmed until arm() again.
  using Ready = std::function<void(void* who)>;

  // Throws CollectiveError (resource_exhausted, out_of_descriptors) when no
  // descriptor is left.
  ChannelPoller(boost::asio::io_context& io, Ready ready);
  ~ChannelPoller();
  ChannelPoller(const ChannelPoller&) = delete;
  ChannelPoller& operator=(const ChannelPoller&) = delete;

  // Watches `fd` for `who`, unarmed.
  void add(int fd, void* who);
  // Reports `fd` once when it is readable (now, if it is already).
  void arm(int fd, void* who);
  // Stops reporting `fd` until arm().
  void disarm(int fd, void* who);
  // Starts waiting on the progress thread.
  void start();

 private:
  struct Waiter;
  void control(int operation, int fd, std::uint32_t events, void* who);

  int epoll_;  // owned by the waiter, which handlers on the progress thread may outlive us in
  std::shared_ptr<Waiter> waiter_;
};

}  // namespace rlx::tcp
