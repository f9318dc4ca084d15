#include "rlx/transport/asio.h"

#include "rlx/transport/errors.h"
#include "rlx/transport/log.h"

namespace rlx {

IoContext::IoContext() try : boost
  ::asio::io_context() {
    // Asio makes its reactor (epoll, eventfd, timerfd) when the first timer or
    // socket needs it: make it now, where its failure is caught.
    const boost::asio::steady_timer makes_the_reactor(*this);
  }
catch (const boost::system::system_error& error) {
  if (!is_out_of_descriptors(error.code().value())) throw;
  throw out_of_descriptors({.operation = "set up a group"},
                           "an event loop (epoll, eventfd, timerfd)", error.code().value());
}

// The pause before accepting again after a passing failure.
constexpr std::chrono::milliseconds kAcceptRetryPause{100};

bool AcceptRetry::after_failure(const boost::system::error_code& ec,
                                const boost::asio::ip::tcp::acceptor& acceptor,
                                const std::string& what, std::function<void()> accept_again) {
  if (ec == boost::asio::error::operation_aborted || !acceptor.is_open()) return false;
  if (!failing_) {
    log_warning(what + ": cannot accept connections (" + ec.message() +
                "); retrying every 100 ms. A flood of connections? Check who connects, and "
                "ulimit -n");
    failing_ = true;
  }
  timer_.expires_after(kAcceptRetryPause);
  timer_.async_wait([again = std::move(accept_again)](boost::system::error_code wait_ec) {
    if (!wait_ec) again();
  });
  return true;
}

}  // namespace rlx
