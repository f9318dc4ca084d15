#include "rlx/backends/tcp/channel_poller.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "rlx/transport/asio.h"
#include "rlx/transport/errors.h"

namespace rlx::tcp {
namespace asio = boost::asio;

struct ChannelPoller::Waiter : std::enable_shared_from_this<Waiter> {
  Waiter(asio::io_context& io, int epoll, Ready on_ready)
      : stream(io, epoll), epoll_fd(epoll), ready(std::move(on_ready)) {}

  void wait() {
    stream.async_wait(asio::posix::stream_descriptor::wait_read,
                      [self = shared_from_this()](boost::system::error_code ec) {
                        if (!ec) self->on_readable();
                      });
  }

  // Hands on every connection that is ready, then waits for more.
  void on_readable() {
    std::array<epoll_event, 64> events;
    int n = 0;
    do {
      n = ::epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 0);
      for (int i = 0; i < n; ++i) ready(events[static_cast<std::size_t>(i)].data.ptr);
    } while (n == static_cast<int>(events.size()));
    wait();
  }

  asio::posix::stream_descriptor stream;  // owns the epoll set
  int epoll_fd;
  Ready ready;
};

ChannelPoller::ChannelPoller(asio::io_context& io, Ready ready) {
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (epoll.get() < 0) {
    const int error = errno;
    const ErrorSite site{.operation = "set up a group"};
    if (is_out_of_descriptors(error)) {
      throw out_of_descriptors(site, "an epoll set for the point-to-point connections", error);
    }
    throw CollectiveError(ErrorKind::resource_exhausted, site,
                          std::string("cannot create an epoll set: ") + std::strerror(error));
  }
  epoll_ = epoll.get();
  waiter_ = std::make_shared<Waiter>(io, epoll.release(), std::move(ready));
}

ChannelPoller::~ChannelPoller() = default;

void ChannelPoller::control(int operation, int fd, std::uint32_t events, void* who) {
  epoll_event event{};
  event.events = events | EPOLLONESHOT;
  event.data.ptr = who;
  if (::epoll_ctl(epoll_, operation, fd, &event) != 0) {
    throw CollectiveError(ErrorKind::resource_exhausted, {.operation = "watch connection"},
                          std::string("epoll_ctl: ") + std::strerror(errno));
  }
}

void ChannelPoller::add(int fd, void* who) { control(EPOLL_CTL_ADD, fd, 0, who); }

void ChannelPoller::arm(int fd, void* who) {
  control(EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLRDHUP, who);
}

void ChannelPoller::disarm(int fd, void* who) { control(EPOLL_CTL_MOD, fd, 0, who); }

void ChannelPoller::start() {
  // Drains first: connections armed before the first wait may be ready already.
  asio::post(waiter_->stream.get_executor(), [waiter = waiter_] { waiter->on_readable(); });
}

}  // namespace rlx::tcp
