#include "rlx/backends/tcp/tcp_transport.h"

#include <algorithm>
#include <thread>

#include "rlx/backends/tcp/static_hostfile.h"
#include "rlx/backends/tcp/tcp.h"
#include "rlx/collectives/algorithms.h"
#include "rlx/transport/asio.h"
#include "rlx/transport/congestion_control.h"
#include "rlx/transport/endpoint.h"
#include "rlx/transport/log.h"
#include "rlx/transport/rendezvous/client.h"

namespace rlx::tcp {
namespace asio = boost::asio;
using launch_env::startup_site;

namespace {

// How long shutdown waits for peers to close their side before closing ours.
constexpr auto kLinger = std::chrono::seconds(2);

}  // namespace

struct TcpTransport::Io {
  IoContext context;
  asio::executor_work_guard<asio::io_context::executor_type> guard{context.get_executor()};
  std::thread thread{[this] { context.run(); }};

  // Stops the progress thread; the context (and every Asio object bound to
  // it) must outlive this call.
  void stop() {
    guard.reset();
    context.stop();
    if (thread.joinable()) thread.join();
  }
  ~Io() { stop(); }
};

TcpTransport::TcpTransport(const launch_env::LaunchEnv& env, Unconnected)
    : LinksTransport(env, "tcp"),
      env_(env),
      spec_{rank(), world_size(), env.tcp_lanes, env.job_token,
            CongestionControl::from_setting(env.tcp_congestion,
                                            startup_site(env, "set up tcp connections"))},
      mailbox_(env.unexpected_bytes_cap, bounded_spin_for_delivery()),
      io_(std::make_unique<Io>()) {}

TcpTransport::TcpTransport(const launch_env::LaunchEnv& env) : TcpTransport(env, Unconnected{}) {
  const Deadline deadline = Clock::now() + env.connect_timeout;
  std::vector<HostPort> table;
  if (!env.hostfile.empty()) {
    table = read_static_table(env);
    if (table.size() != static_cast<std::size_t>(world_size())) {
      throw CollectiveError(ErrorKind::invalid_argument, startup_site(env, "read the hostfile"),
                            env.hostfile + " lists " + std::to_string(table.size()) +
                                " ranks but the group has " + std::to_string(world_size()) + " (" +
                                std::string(launch_env::name_of(env.group_source)) + ")");
    }
    const HostPort& self = table[static_cast<std::size_t>(rank())];
    listen(configured_address(env).value_or(self.host), self.port);
  } else {
    const auto [fd, coordinator] = rendezvous::connect_to_coordinator(
        env, deadline, "start the program with rlxrun, or give every rank RLX_HOSTFILE");
    const HostPort mine = listen(configured_address(env).value_or(local_host(fd.get())), 0);
    table = rendezvous::exchange_endpoints(fd.get(), coordinator, env.job_token, rank(),
                                           world_size(), mine, deadline);
  }
  join(table, deadline);
}

TcpTransport::TcpTransport(const launch_env::LaunchEnv& env, const std::string& host,
                           const EndpointExchange& exchange, SetupWatch watch)
    : TcpTransport(env, Unconnected{}) {
  setup_watch_ = std::move(watch);
  const std::vector<HostPort> table = exchange(listen(host, 0));
  // The exchange has its own deadline (a store's, PMIx's), and ends when the
  // last rank joins it: the connections' deadline starts then.
  join(table, Clock::now() + env.connect_timeout);
  setup_watch_ = nullptr;  // it looks at the parent, which may go first
}

HostPort TcpTransport::listen(const std::string& host, std::uint16_t port) {
  host_ = host;
  listener_ = std::make_unique<Listener>(
      io_->context, listen_address_for(host, configured_address(env_).has_value()), port, spec_);
  return {host, listener_->port()};
}

void TcpTransport::join(const std::vector<HostPort>& table, Deadline deadline) {
  log_lazily(LogLevel::debug, [&] {
    return "listening on port " + std::to_string(listener_->port()) + "; connecting to " +
           std::to_string(world_size() - 1) + " peers, " + std::to_string(spec_.lanes + 1) +
           " connections each";
  });
  connect_mesh(table, deadline);
  set_up_same_host(
      env_, mailbox_, latch_,
      {.site = [this](std::string_view operation, int peer,
                      std::string sizes) { return site(operation, peer, std::move(sizes)); },
       .fail = [this](const CollectiveError& e) { fail(e, true); },
       .describe_silent_peers = [this] { return describe_silent_peers(); }});
}

std::shared_ptr<Transport> TcpTransport::do_split(const SplitPlan& plan) {
  return split_as<TcpTransport>(
      *this, env_, plan, host_,
      {.fail = [this](const CollectiveError& e) { fail(e, true); }, .latch = latch_});
}

void TcpTransport::connect_mesh(const std::vector<HostPort>& table, Deadline deadline) {
  const auto n = static_cast<std::size_t>(world_size());
  std::vector<std::vector<UniqueFd>> connections(n);
  for (int peer = 0; peer < rank(); ++peer) {
    for (int index = 0; index <= spec_.lanes; ++index) {
      connections[static_cast<std::size_t>(peer)].push_back(connect_to_peer(
          table[static_cast<std::size_t>(peer)], peer, index, spec_, deadline, setup_watch_));
    }
  }
  auto inbound = listener_->wait_for_peers(deadline, setup_watch_);
  for (std::size_t peer = static_cast<std::size_t>(rank()) + 1; peer < n; ++peer) {
    connections[peer] = std::move(inbound[peer]);
  }

  PeerChannel::Hooks hooks{
      .fail =
          [this](std::exception_ptr error, bool tell_peers) {
            try {
              std::rethrow_exception(error);
            } catch (const CollectiveError& e) {
              fail(e, tell_peers);
            }
          },
      .site = [this](std::string_view operation, int peer) { return site(operation, peer); },
      .peer_closed = [this] { closed_cv_.notify_all(); }};
  std::vector<std::vector<UniqueFd>> lanes(n);
  poller_ = std::make_unique<ChannelPoller>(io_->context, &PeerChannel::on_readable);
  channels_.resize(n);
  for (std::size_t peer = 0; peer < n; ++peer) {
    if (peer == static_cast<std::size_t>(rank())) continue;
    auto& mine = connections[peer];
    log_lazily(LogLevel::info, [&] {
      return "peer " + std::to_string(peer) + ": connected by tcp to " + table[peer].host + ":" +
             std::to_string(table[peer].port) + ", " + std::to_string(mine.size()) +
             " connections, congestion control " + congestion_control_of(mine[0].get());
    });
    channels_[peer] = std::make_unique<PeerChannel>(*poller_, std::move(mine[0]),
                                                    static_cast<int>(peer), mailbox_, hooks);
    for (std::size_t lane = 1; lane < mine.size(); ++lane) {
      lanes[peer].push_back(std::move(mine[lane]));
    }
  }
  links_ = std::make_unique<LaneLinks>(rank(), world_size(), std::move(lanes), timeout(),
                                       bounded_spin_for(env_.ranks_here()), latch_,
                                       [this](const CollectiveError& e) { fail(e, true); });
  links_->set_silence_probe([this] { return describe_silent_peers(); });
  for (auto& channel : channels_) {
    if (channel) channel->start();
  }
  poller_->start();
}

TcpTransport::~TcpTransport() {
  stop_background_work();
  tear_down_same_host();
  close_gracefully();
}

void TcpTransport::close_gracefully() {
  if (!links_) return;
  relay_.say_goodbye();
  for (auto& channel : channels_) {
    if (channel) channel->shutdown_send();
  }
  links_->shutdown_send();
  // Wait briefly for the peers' own close, so we do not reset connections
  // whose last bytes they are still reading.
  std::unique_lock lock(closed_mutex_);
  closed_cv_.wait_for(lock, std::min<Clock::duration>(kLinger, timeout()), [this] {
    for (auto& channel : channels_) {
      if (channel && !channel->peer_has_closed() && !latch_.tripped()) return false;
    }
    return true;
  });
  lock.unlock();
  io_->stop();
  channels_.clear();
  poller_.reset();  // Asio objects go before their io_context
  listener_.reset();
  io_.reset();
}

std::uint16_t TcpTransport::listen_port() const { return listener_->port(); }

void TcpTransport::fail(const CollectiveError& error, bool tell_peers) {
  if (!relay_.trip(error, !tell_peers)) return;
  { std::lock_guard lock(closed_mutex_); }  // a close waiting on closed_cv_ sees the latch
  closed_cv_.notify_all();
  if (tell_peers) relay_.tell_peers(error);
}

void TcpTransport::send_to_peers(const wire::FrameHeader& header,
                                 std::span<const std::byte> payload) {
  const Deadline deadline = Clock::now() + std::chrono::seconds(1);
  for (auto& channel : channels_) {
    if (!channel) continue;
    try {
      channel->send(header, payload, deadline, -1);
    } catch (const IoError&) {
      // That peer is gone; the others still hear.
    }
  }
}

std::string TcpTransport::describe_silent_peers() {
  constexpr auto kAnswerWithin = std::chrono::seconds(1);
  const Deadline deadline = Clock::now() + std::min<Clock::duration>(kAnswerWithin, timeout());
  std::vector<std::pair<int, std::uint64_t>> asked;  // peer, pongs before the ping
  std::vector<int> silent;
  for (std::size_t peer = 0; peer < channels_.size(); ++peer) {
    PeerChannel* channel = channels_[peer].get();
    if (channel == nullptr || channel->peer_has_closed()) continue;
    const std::uint64_t before = channel->pongs();
    try {
      channel->ping(deadline);
      asked.emplace_back(static_cast<int>(peer), before);
    } catch (const IoError&) {
      silent.push_back(static_cast<int>(peer));
    }
  }
  const auto answered = [&](const std::pair<int, std::uint64_t>& ask) {
    return channels_[static_cast<std::size_t>(ask.first)]->pongs() > ask.second;
  };
  while (Clock::now() < deadline && !latch_.tripped() &&
         !std::all_of(asked.begin(), asked.end(), answered)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (const auto& ask : asked) {
    if (!answered(ask)) silent.push_back(ask.first);
  }
  if (latch_.tripped()) return "";
  if (silent.empty()) {
    return "; every other rank's process still answers, so one of them has not reached this "
           "collective";
  }
  std::sort(silent.begin(), silent.end());
  std::string ranks;
  for (int peer : silent) ranks += (ranks.empty() ? "" : ", ") + std::to_string(peer);
  return std::string("; rank") + (silent.size() > 1 ? "s " : " ") + ranks +
         (silent.size() > 1 ? " do" : " does") +
         " not answer at all (the process is stopped or hung): the likely cause";
}

void TcpTransport::send_over_network(int to, Tag tag, std::span<const std::byte> payload) {
  latch_.rethrow_if_tripped();
  if (to == rank()) {
    if (!mailbox_.deliver(to, tag, {payload.begin(), payload.end()}, mailbox_.awaited(to, tag))) {
      throw CollectiveError(ErrorKind::resource_exhausted,
                            site("send_bytes", to, format_bytes(payload.size())),
                            "messages to self not yet received exceed RLX_UNEXPECTED_BYTES");
    }
    return;
  }
  try {
    channels_[static_cast<std::size_t>(to)]->send({.kind = wire::FrameKind::message, .tag = tag},
                                                  payload, Clock::now() + timeout(),
                                                  latch_.wake_fd());
  } catch (const IoError& error) {
    latch_.rethrow_if_tripped();
    const bool timed_out = error.kind() == IoError::Kind::timeout;
    const std::string peer = "rank " + std::to_string(to);
    // A live receiver's progress thread reads every message (or fails the
    // job at RLX_UNEXPECTED_BYTES), so a send that found no room is a peer
    // that stopped reading.
    CollectiveError failure(
        timed_out ? ErrorKind::timeout : ErrorKind::peer_lost,
        site("send_bytes", to, "tag " + std::to_string(tag) + ", " + format_bytes(payload.size())),
        timed_out
            ? peer + " has not read the message within " + std::to_string(timeout().count()) + " ms"
            : std::string(error.what()),
        timed_out ? "is " + peer + " stopped or hung, or busy without reading its sockets?" : "");
    fail(failure, timed_out);
    throw failure;
  }
}

std::vector<std::byte> TcpTransport::recv_over_network(int from, Tag tag) {
  return take_from_mailbox(from, tag, Clock::now() + timeout());
}

std::size_t TcpTransport::recv_over_network_into(int from, Tag tag, std::span<std::byte> into,
                                                 std::size_t element) {
  const Deadline deadline = Clock::now() + timeout();
  PeerChannel* channel = channels_[static_cast<std::size_t>(from)].get();
  // Waiting from the start, wherever the message is read; left as it is
  // taken, so the message behind it is never taken for awaited.
  Mailbox::WaitingReceiver waiting(mailbox_, from, tag);
  std::optional<PeerChannel::Received> received;
  if (channel != nullptr) {  // null: this rank's own messages, in the mailbox
    received = as_receive_from(from, tag, [&] {
      return channel->receive_into(tag, into, element, deadline, bounded_spin_for_delivery(),
                                   latch_.wake_fd(), waiting);
    });
  }
  if (received) {
    if (const auto* length = std::get_if<std::size_t>(&*received)) return *length;
    return place_or_keep(from, tag, std::get<std::vector<std::byte>>(std::move(*received)), into,
                         element);
  }
  return place_or_keep(from, tag, take_from_mailbox(from, tag, deadline, &waiting), into, element);
}

std::vector<std::byte> TcpTransport::take_from_mailbox(int from, Tag tag, Deadline deadline,
                                                       Mailbox::WaitingReceiver* waiting) {
  PeerChannel::Pump pump(channels_[static_cast<std::size_t>(from)].get());
  std::optional<std::vector<std::byte>> message = as_receive_from(
      from, tag, [&] { return mailbox_.take(from, tag, deadline, &pump, waiting); });
  if (message) return std::move(*message);
  const ErrorSite where = receive_site(from, tag);
  const std::string within = " within " + std::to_string(timeout().count()) + " ms";
  PeerChannel* channel = channels_[static_cast<std::size_t>(from)].get();
  if (const auto stalled = channel ? channel->stalled_message() : std::nullopt) {
    throw CollectiveError(ErrorKind::timeout, where,
                          "rank " + std::to_string(from) + " began a message of " +
                              format_bytes(stalled->length) + " (tag " +
                              std::to_string(stalled->tag) + ") and sent " +
                              format_bytes(stalled->arrived) + " of it" + within,
                          "is rank " + std::to_string(from) + " stopped or hung?");
  }
  throw CollectiveError(ErrorKind::timeout, where, "no message arrived" + within,
                        "does rank " + std::to_string(from) + " send with this tag?");
}

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env) {
  return std::make_shared<TcpTransport>(env);
}

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env, const std::string& host,
                                  const EndpointExchange& exchange) {
  return std::make_shared<TcpTransport>(env, host, exchange);
}

}  // namespace rlx::tcp
