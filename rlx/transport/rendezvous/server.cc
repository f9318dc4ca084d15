#include "rlx/transport/rendezvous/server.h"

#include <deque>
#include <optional>

#include "rlx/transport/asio.h"
#include "rlx/transport/log.h"
#include "rlx/transport/pending_handshakes.h"
#include "rlx/transport/rendezvous/protocol.h"
#include "rlx/transport/wire.h"

namespace rlx::rendezvous {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// A connection must register within this time, or it is dropped.
constexpr auto kRegisterWithin = std::chrono::seconds(10);
// How often, at most, registered ranks hear who is still missing.
constexpr auto kNoticeEvery = std::chrono::milliseconds(500);

std::vector<std::byte> framed(std::vector<std::byte> body) {
  wire::ByteWriter w;
  w.u32(static_cast<std::uint32_t>(body.size()));
  w.raw(body);
  return w.take();
}

}  // namespace

struct Server::Impl {
  struct Session : std::enable_shared_from_this<Session> {
    Session(Impl& owner, tcp::socket s)
        : impl(owner), socket(std::move(s)), timer(socket.get_executor()) {}
    Impl& impl;
    tcp::socket socket;
    asio::steady_timer timer;
    auth::Nonce server_nonce = auth::fresh_nonce();
    auth::Nonce client_nonce{};
    std::vector<std::byte> out;
    bool writing = false;
    // The next message while one is being written: a newer notice or the
    // table replaces an older notice, which says less.
    std::optional<std::vector<std::byte>> queued;
    bool queued_is_table = false;
    std::array<std::byte, 4> length{};
    std::vector<std::byte> body;
    std::string peer;
    PendingHandshakes::Ticket ticket = 0;
    bool rejected = false;
  };

  Impl(Server& server, int world_size, std::string job_token, const std::string& bind_host,
       std::uint16_t port)
      : owner(server),
        token(std::move(job_token)),
        acceptor(io, tcp::endpoint(asio::ip::make_address(bind_host), port)),
        slots(static_cast<std::size_t>(world_size)),
        table_entries(static_cast<std::size_t>(world_size)) {}

  void start() {
    accept();
    thread = std::thread([this] { io.run(); });
  }

  void stop() {
    asio::post(io, [this] {
      boost::system::error_code ignored;
      acceptor.close(ignored);
      for (auto& slot : slots) {
        if (slot) slot->socket.close(ignored);
      }
    });
    io.stop();
    if (thread.joinable()) thread.join();
  }

  void accept() {
    pending.when_room([this] { accept_now(); });
  }

  void accept_now() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) {
        accept_retry.after_failure(ec, acceptor, "rendezvous", [this] { accept(); });
        return;
      }
      accept_retry.after_success();
      auto session = std::make_shared<Session>(*this, std::move(socket));
      boost::system::error_code ignored;
      session->peer = session->socket.remote_endpoint(ignored).address().to_string();
      session->ticket = pending.admit([this, weak = std::weak_ptr(session)] {
        if (auto s = weak.lock()) {
          reject(s, "its registration was unfinished after 1 s while " +
                        std::to_string(pending.limit()) +
                        " connections were registering, the most the rendezvous takes at once");
        }
      });
      greet(session);
      accept();
    });
  }

  // `registration`: the connection spoke the protocol but was refused (another
  // token, world size, a rank twice): the registered ranks hear of it too,
  // since it is likely one of theirs, misconfigured.
  void reject(const std::shared_ptr<Session>& s, const std::string& why,
              bool registration = false) {
    if (std::exchange(s->rejected, true)) return;  // its pending reads fail next: said once
    pending.finished(s->ticket);
    log_warning("rendezvous: dropped a connection from " + s->peer + ": " + why);
    if (registration) {
      if (refusals.size() == kMaxListedRefusals) refusals.pop_front();
      refusals.push_back(s->peer + ": " + why);
      schedule_notice();
    }
    boost::system::error_code ignored;
    s->timer.cancel();
    s->socket.close(ignored);
  }

  void greet(const std::shared_ptr<Session>& s) {
    s->timer.expires_after(kRegisterWithin);
    s->timer.async_wait([this, s](boost::system::error_code ec) {
      if (!ec) reject(s, "no registration within 10 s");
    });
    s->out = framed(encode_server_hello(s->server_nonce));
    asio::async_write(s->socket, asio::buffer(s->out), [this, s](auto ec, std::size_t) {
      if (ec) return reject(s, "closed before registering");
      read_registration(s);
    });
  }

  void read_registration(const std::shared_ptr<Session>& s) {
    asio::async_read(s->socket, asio::buffer(s->length), [this, s](auto ec, std::size_t) {
      if (ec) return reject(s, "closed before registering");
      const auto size = wire::ByteReader(s->length).u32();
      if (size > kMaxMessageBytes) {
        return reject(s, "announced a " + std::to_string(size) + "-byte message");
      }
      s->body.resize(size);
      asio::async_read(s->socket, asio::buffer(s->body), [this, s](auto ec2, std::size_t) {
        if (ec2) return reject(s, "closed before registering");
        on_registration(s);
      });
    });
  }

  void on_registration(const std::shared_ptr<Session>& s) {
    Registration reg;
    try {
      reg = decode_register(s->body, token, s->server_nonce);
    } catch (const wire::DecodeError& error) {
      return reject(s, error.what(), /*registration=*/true);
    }
    if (reg.world_size != slots.size()) {
      return reject(s,
                    "registered for a world of " + std::to_string(reg.world_size) +
                        " ranks; this job has " + std::to_string(slots.size()),
                    /*registration=*/true);
    }
    {
      std::lock_guard lock(mutex);
      if (slots[reg.rank]) {
        return reject(s, "rank " + std::to_string(reg.rank) + " registered twice",
                      /*registration=*/true);
      }
      slots[reg.rank] = s;
      table_entries[reg.rank] = reg.endpoint;
    }
    pending.finished(s->ticket);
    s->timer.cancel();
    s->client_nonce = reg.nonce;
    if (++owner.registered_ == static_cast<int>(slots.size())) return send_tables();
    // The newcomer hears at once who is missing (its deadline may be near);
    // the others at the next notice.
    send(s, framed(encode_waiting(waiting_now(), token, s->client_nonce)), false);
    schedule_notice();
  }

  void send_tables() {
    for (auto& s : slots)
      send(s, framed(encode_table(table_entries, token, s->client_nonce)), true);
  }

  // Writes one message at a time; after the table, the rank has all it needs.
  void send(const std::shared_ptr<Session>& s, std::vector<std::byte> message, bool table) {
    if (s->writing) {
      if (!s->queued_is_table) {
        s->queued = std::move(message);
        s->queued_is_table = table;
      }
      return;
    }
    s->writing = true;
    s->out = std::move(message);
    asio::async_write(s->socket, asio::buffer(s->out), [this, s, table](auto ec, std::size_t) {
      s->writing = false;
      boost::system::error_code ignored;
      if (table) s->socket.shutdown(tcp::socket::shutdown_send, ignored);
      if (ec || table || !s->queued) return;
      auto next = std::move(*std::exchange(s->queued, std::nullopt));
      send(s, std::move(next), std::exchange(s->queued_is_table, false));
    });
  }

  Waiting waiting_now() {
    Waiting waiting{.world_size = static_cast<std::uint32_t>(slots.size())};
    std::lock_guard lock(mutex);
    for (std::size_t r = 0; r < slots.size(); ++r) {
      if (slots[r]) continue;
      ++waiting.missing_count;
      if (waiting.missing.size() < kMaxListedRanks) {
        waiting.missing.push_back(static_cast<std::uint32_t>(r));
      }
    }
    waiting.refusals.assign(refusals.begin(), refusals.end());
    return waiting;
  }

  // Tells every registered rank who is missing, at most every kNoticeEvery,
  // so a rank that gives up can name them (O(ranks) messages a notice).
  void schedule_notice() {
    if (std::exchange(notice_scheduled, true)) return;
    notice_timer.expires_after(kNoticeEvery);
    notice_timer.async_wait([this](boost::system::error_code ec) {
      notice_scheduled = false;
      if (ec || owner.complete()) return;
      const Waiting waiting = waiting_now();
      for (auto& s : registered_sessions()) {
        send(s, framed(encode_waiting(waiting, token, s->client_nonce)), false);
      }
    });
  }

  std::vector<std::shared_ptr<Session>> registered_sessions() {
    std::lock_guard lock(mutex);
    std::vector<std::shared_ptr<Session>> out;
    for (auto& s : slots) {
      if (s) out.push_back(s);
    }
    return out;
  }

  Server& owner;
  std::string token;
  asio::io_context io;
  tcp::acceptor acceptor;
  AcceptRetry accept_retry{io.get_executor()};
  PendingHandshakes pending{io.get_executor()};
  std::thread thread;
  std::mutex mutex;
  std::vector<std::shared_ptr<Session>> slots;
  std::vector<HostPort> table_entries;
  std::deque<std::string> refusals;  // the last kMaxListedRefusals, for the notices
  asio::steady_timer notice_timer{io};
  bool notice_scheduled = false;
};

const std::string& Server::token() const { return impl_->token; }

Server::Server(int world_size, std::string token, const std::string& bind_host, std::uint16_t port)
    : world_size_(world_size) {
  try {
    impl_ = std::make_unique<Impl>(*this, world_size, std::move(token), bind_host, port);
  } catch (const boost::system::system_error& error) {
    throw std::runtime_error("rendezvous: cannot listen on " +
                             HostPort{bind_host, port}.to_string() + ": " + error.what());
  }
  address_ = {bind_host, impl_->acceptor.local_endpoint().port()};
  impl_->start();
}

Server::~Server() { impl_->stop(); }

std::vector<int> Server::missing() const {
  std::lock_guard lock(impl_->mutex);
  std::vector<int> out;
  for (std::size_t r = 0; r < impl_->slots.size(); ++r) {
    if (!impl_->slots[r]) out.push_back(static_cast<int>(r));
  }
  return out;
}

}  // namespace rlx::rendezvous

namespace rlx::rendezvous {

std::vector<HostPort> Server::endpoints() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->table_entries;
}

}  // namespace rlx::rendezvous
