// Boost.Asio, included the one way rlx includes it.
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including
// <utility>; GCC 12 in C++20 mode then fails to compile it.
#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include <boost/asio.hpp>  // IWYU pragma: export

namespace rlx {

// An io_context whose construction makes its reactor at once, and fails with
// CollectiveError resource_exhausted naming the descriptor limit
// (out_of_descriptors) when no descriptor is left for its epoll, eventfd and
// timerfd: a split() at the limit failed with Asio's bare system_error,
// which nothing expects, when the first socket or timer made it lazily.
class IoContext : public boost::asio::io_context {
 public:
  IoContext();
};

// What an accept loop does after async_accept fails. A closed acceptor ends
// the loop. Anything else (out of descriptors under a flood of connections,
// out of memory, a connection reset before it was taken) passes: the loop
// must go on, or one flood of strangers would leave a port that never accepts
// again. `retry` waits a moment first, so a failure that persists cannot spin
// the progress thread, and the failure is logged once until an accept succeeds.
class AcceptRetry {
 public:
  explicit AcceptRetry(boost::asio::any_io_executor executor) : timer_(std::move(executor)) {}

  // Returns false when the loop must end. `what` names the port for the log.
  bool after_failure(const boost::system::error_code& ec,
                     const boost::asio::ip::tcp::acceptor& acceptor, const std::string& what,
                     std::function<void()> accept_again);
  void after_success() { failing_ = false; }

 private:
  boost::asio::steady_timer timer_;
  bool failing_ = false;
};

}  // namespace rlx
