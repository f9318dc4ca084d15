#include "rlx/transport/pending_handshakes.h"

#include <algorithm>

#include <sys/resource.h>

namespace rlx {

std::size_t PendingHandshakes::default_limit() {
  rlimit files{};
  if (::getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return 128;
  return std::clamp<std::size_t>(static_cast<std::size_t>(files.rlim_cur / 4), 16, 128);
}

PendingHandshakes::PendingHandshakes(boost::asio::any_io_executor executor, std::size_t limit,
                                     Clock::duration grace)
    : limit_(std::max<std::size_t>(limit, 1)), grace_(grace), timer_(std::move(executor)) {}

void PendingHandshakes::when_room(std::function<void()> accept) {
  if (pending_.size() >= limit_) {
    auto oldest = pending_.begin();
    if (Clock::now() - oldest->second.since < grace_) {
      waiting_accept_ = std::move(accept);
      timer_.expires_at(oldest->second.since + grace_);
      timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) resume_waiting_accept();
      });
      return;
    }
    auto evict = std::move(oldest->second.evict);
    pending_.erase(oldest);
    evict();
  }
  accept();
}

PendingHandshakes::Ticket PendingHandshakes::admit(std::function<void()> evict) {
  const Ticket ticket = next_ticket_++;
  pending_.emplace(ticket, Connection{Clock::now(), std::move(evict)});
  return ticket;
}

void PendingHandshakes::finished(Ticket ticket) {
  if (pending_.erase(ticket) == 0 || !waiting_accept_) return;
  timer_.cancel();
  resume_waiting_accept();
}

void PendingHandshakes::resume_waiting_accept() {
  if (!waiting_accept_) return;
  auto accept = std::move(waiting_accept_);
  waiting_accept_ = nullptr;
  when_room(std::move(accept));
}

}  // namespace rlx
