#include "rlx/backends/tcp/mesh.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "rlx/transport/asio.h"
#include "rlx/transport/errors.h"
#include "rlx/transport/handshake.h"
#include "rlx/transport/log.h"
#include "rlx/transport/pending_handshakes.h"
#include "rlx/transport/wire.h"

namespace rlx::tcp {
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// A connection must finish its handshake within this time.
constexpr auto kHandshakeWithin = std::chrono::seconds(10);

}  // namespace

struct Listener::Impl : std::enable_shared_from_this<Impl> {
  struct Session {
    explicit Session(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
    tcp::socket socket;
    asio::steady_timer timer;
    std::array<std::byte, wire::kHelloBytes> hello_bytes{};
    wire::Hello hello;
    auth::Nonce nonce = auth::fresh_nonce();
    std::array<std::byte, wire::kChallengeBytes> challenge{};
    std::array<std::byte, wire::kResponseBytes> response{};
    std::array<std::byte, wire::kWelcomeBytes> welcome = wire::encode_welcome();
    std::string peer;
    PendingHandshakes::Ticket ticket = 0;
    bool dropped = false;
  };
  using SessionPtr = std::shared_ptr<Session>;

  Impl(asio::io_context& io, MeshSpec mesh_spec)
      : acceptor(io),
        accept_retry(io.get_executor()),
        pending(io.get_executor()),
        spec(std::move(mesh_spec)),
        arrived(static_cast<std::size_t>(spec.world_size)) {
    for (auto& connections : arrived) connections.resize(static_cast<std::size_t>(spec.lanes) + 1);
  }

  void accept() {
    pending.when_room([self = shared_from_this()] { self->accept_now(); });
  }

  void accept_now() {
    acceptor.async_accept(
        [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
          if (ec) {
            if (is_out_of_descriptors(ec.value())) self->out_of_descriptors(ec.value());
            self->accept_retry.after_failure(ec, self->acceptor,
                                             "rank " + std::to_string(self->spec.rank),
                                             [self] { self->accept(); });
            return;
          }
          self->accept_retry.after_success();
          auto session = std::make_shared<Session>(std::move(socket));
          boost::system::error_code ignored;
          const auto remote = session->socket.remote_endpoint(ignored);
          session->peer = remote.address().to_string() + ":" + std::to_string(remote.port());
          // The closure lives in this Impl's own `pending`: a raw pointer back, not a cycle.
          session->ticket = self->pending.admit([impl = self.get(), weak = std::weak_ptr(session)] {
            if (auto s = weak.lock()) impl->drop(s, impl->eviction_reason());
          });
          self->start_handshake(session);
          self->accept();
        });
  }

  void drop(const SessionPtr& s, const std::string& why) {
    if (std::exchange(s->dropped, true)) return;  // its pending reads fail next: said once
    pending.finished(s->ticket);
    log_warning("rank " + std::to_string(spec.rank) + ": refused a connection from " + s->peer +
                ": " + why);
    boost::system::error_code ignored;
    s->timer.cancel();
    s->socket.close(ignored);
  }

  void start_handshake(const SessionPtr& s) {
    s->timer.expires_after(kHandshakeWithin);
    s->timer.async_wait([self = shared_from_this(), s](boost::system::error_code ec) {
      if (!ec) self->drop(s, "no handshake within 10 s");
    });
    asio::async_read(s->socket, asio::buffer(s->hello_bytes),
                     [self = shared_from_this(), s](auto ec, std::size_t) {
                       if (ec) return self->drop(s, "closed during the handshake");
                       self->on_hello(s);
                     });
  }

  void on_hello(const SessionPtr& s) {
    try {
      s->hello = wire::decode_hello(s->hello_bytes);
    } catch (const wire::DecodeError& error) {
      return drop(s, error.what());
    }
    if (auto why = wire::refusal_reason(s->hello, spec.rank, spec.world_size,
                                        static_cast<std::uint32_t>(spec.lanes));
        !why.empty()) {
      return drop(s, why);
    }
    s->challenge = wire::encode_challenge(
        {s->nonce, wire::acceptor_mac(spec.token, s->hello_bytes, s->nonce)});
    asio::async_write(s->socket, asio::buffer(s->challenge),
                      [self = shared_from_this(), s](auto ec, std::size_t) {
                        if (ec) return self->drop(s, "closed during the handshake");
                        self->read_response(s);
                      });
  }

  void read_response(const SessionPtr& s) {
    asio::async_read(s->socket, asio::buffer(s->response),
                     [self = shared_from_this(), s](auto ec, std::size_t) {
                       if (ec) return self->drop(s, "closed during the handshake");
                       self->on_response(s);
                     });
  }

  void on_response(const SessionPtr& s) {
    if (!auth::equal(wire::connector_mac(spec.token, s->hello_bytes, s->nonce), s->response)) {
      return drop(s, "wrong job token");
    }
    {
      std::lock_guard lock(mutex);
      auto& slot = arrived[s->hello.from_rank][s->hello.connection];
      if (slot || closed) {
        return drop(s, "duplicate connection " + std::to_string(s->hello.connection) +
                           " from rank " + std::to_string(s->hello.from_rank));
      }
    }
    asio::async_write(s->socket, asio::buffer(s->welcome),
                      [self = shared_from_this(), s](auto ec, std::size_t) {
                        if (ec) return self->drop(s, "closed during the handshake");
                        self->deliver(s);
                      });
  }

  std::string eviction_reason() const {
    return "its handshake was unfinished after 1 s while " + std::to_string(pending.limit()) +
           " connections were handshaking, the most this rank takes at once";
  }

  void deliver(const SessionPtr& s) {
    pending.finished(s->ticket);
    s->timer.cancel();
    boost::system::error_code ec;
    UniqueFd fd(s->socket.release(ec));
    if (ec) return;
    configure_stream(fd.get());
    spec.congestion.after_accept(fd.get());
    {
      std::lock_guard lock(mutex);
      auto& slot = arrived[s->hello.from_rank][s->hello.connection];
      if (closed || slot) {
        log_warning("rank " + std::to_string(spec.rank) + ": refused a connection from " + s->peer +
                    ": it arrived after the mesh was complete");
        return;
      }
      slot = std::move(fd);
    }
    changed.notify_all();
  }

  std::string missing_description() {
    std::string missing;
    for (int peer = spec.rank + 1; peer < spec.world_size; ++peer) {
      for (int c = 0; c <= spec.lanes; ++c) {
        if (!arrived[static_cast<std::size_t>(peer)][static_cast<std::size_t>(c)]) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
          break;
        }
      }
    }
    return missing;
  }

  bool complete() { return missing_description().empty(); }

  // A peer's connection cannot be taken: the wait for peers fails now,
  // naming the limit, instead of at the deadline as "never connected".
  void out_of_descriptors(int error_number) {
    {
      std::lock_guard lock(mutex);
      if (closed || accept_error != 0) return;
      accept_error = error_number;
    }
    changed.notify_all();
  }

  tcp::acceptor acceptor;
  AcceptRetry accept_retry;
  PendingHandshakes pending;
  MeshSpec spec;
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::vector<UniqueFd>> arrived;
  bool closed = false;
  int accept_error = 0;  // EMFILE or ENFILE while peers were expected
};

Listener::Listener(asio::io_context& io, const std::string& bind_host, std::uint16_t port,
                   MeshSpec spec)
    : impl_(std::make_shared<Impl>(io, std::move(spec))) {
  try {
    const tcp::endpoint endpoint(asio::ip::make_address(bind_host), port);
    impl_->acceptor.open(endpoint.protocol());
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
    impl_->spec.congestion.before_listen(impl_->acceptor.native_handle());
    impl_->acceptor.bind(endpoint);
    impl_->acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& error) {
    const ErrorSite site{
        .rank = impl_->spec.rank, .world_size = impl_->spec.world_size, .operation = "listen"};
    if (is_out_of_descriptors(error.code().value())) {
      throw out_of_descriptors(site, "a socket to listen on", error.code().value());
    }
    throw CollectiveError(
        ErrorKind::invalid_argument, site,
        "cannot listen on " + HostPort{bind_host, port}.to_string() + ": " + error.code().message(),
        "the address must belong to this host and the port must be free");
  }
  asio::post(io, [impl = impl_] { impl->accept(); });
}

Listener::~Listener() {
  std::lock_guard lock(impl_->mutex);
  impl_->closed = true;
}

std::uint16_t Listener::port() const { return impl_->acceptor.local_endpoint().port(); }

std::vector<std::vector<UniqueFd>> Listener::wait_for_peers(Deadline deadline,
                                                            const std::function<void()>& watch) {
  constexpr auto kWatchEvery = std::chrono::milliseconds(10);
  std::unique_lock lock(impl_->mutex);
  const ErrorSite site{
      .rank = impl_->spec.rank, .world_size = impl_->spec.world_size, .operation = "connect"};
  const auto settled = [this] { return impl_->complete() || impl_->accept_error != 0; };
  bool done = false;
  while (!done && Clock::now() < deadline) {
    done = impl_->changed.wait_until(
        lock, watch ? std::min<Deadline>(deadline, Clock::now() + kWatchEvery) : deadline, settled);
    if (!done && watch) {
      lock.unlock();
      watch();
      lock.lock();
    }
  }
  done = done || settled();
  if (!impl_->complete() && impl_->accept_error != 0) {
    throw out_of_descriptors(site, "a connection from ranks " + impl_->missing_description(),
                             impl_->accept_error);
  }
  if (!done) {
    throw CollectiveError(
        ErrorKind::timeout, site,
        "ranks " + impl_->missing_description() + " never connected before RLX_CONNECT_TIMEOUT_S",
        "those ranks' own output says why they did not start or connect");
  }
  impl_->closed = true;  // later arrivals are duplicates or strangers
  std::vector<std::vector<UniqueFd>> out(impl_->arrived.size());
  for (std::size_t peer = 0; peer < out.size(); ++peer) {
    for (auto& fd : impl_->arrived[peer]) out[peer].push_back(std::move(fd));
  }
  return out;
}

UniqueFd connect_to_peer(const HostPort& address, int peer, int index, const MeshSpec& spec,
                         Deadline deadline, const std::function<void()>& watch) {
  const ErrorSite site{.rank = spec.rank,
                       .world_size = spec.world_size,
                       .peer = peer,
                       .operation = "connect to " + address.to_string()};
  try {
    UniqueFd fd = connect_with_retry(address, deadline, &spec.congestion, watch);
    const wire::Hello hello{static_cast<std::uint32_t>(spec.world_size),
                            static_cast<std::uint32_t>(spec.rank), static_cast<std::uint32_t>(peer),
                            static_cast<std::uint32_t>(index), auth::fresh_nonce()};
    const auto hello_bytes = wire::encode_hello(hello);
    send_all(fd.get(), hello_bytes, deadline);
    std::array<std::byte, wire::kChallengeBytes> challenge_bytes;
    recv_exact(fd.get(), challenge_bytes, deadline);
    const wire::Challenge challenge = wire::decode_challenge(challenge_bytes);
    if (!auth::equal(wire::acceptor_mac(spec.token, hello_bytes, challenge.nonce), challenge.mac)) {
      throw CollectiveError(ErrorKind::protocol_violation, site,
                            "the peer does not hold this job's token",
                            "every rank needs the same RLX_JOB_TOKEN (rlxrun sets it)");
    }
    send_all(fd.get(), wire::connector_mac(spec.token, hello_bytes, challenge.nonce), deadline);
    std::array<std::byte, wire::kWelcomeBytes> welcome;
    recv_exact(fd.get(), welcome, deadline);
    if (!wire::is_welcome(welcome)) throw wire::DecodeError("no welcome after the handshake");
    return fd;
  } catch (const wire::DecodeError& error) {
    throw CollectiveError(ErrorKind::protocol_violation, site, error.what());
  } catch (const IoError& error) {
    if (error.kind() == IoError::Kind::out_of_descriptors) {
      throw out_of_descriptors(site, "a socket to connect to rank " + std::to_string(peer),
                               error.error_number());
    }
    const auto kind =
        error.kind() == IoError::Kind::timeout ? ErrorKind::timeout : ErrorKind::peer_lost;
    throw CollectiveError(kind, site, error.what(),
                          kind == ErrorKind::peer_lost
                              ? "the peer refused the handshake: its log names the reason"
                              : "is the peer running, and is its address reachable from here?");
  }
}

}  // namespace rlx::tcp
