#include "rlx/backends/verbs/connection_manager.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <rdma/rdma_cma.h>

#include "rlx/transport/handshake.h"
#include "rlx/transport/log.h"
#include "rlx/transport/wire.h"

namespace rlx::verbs {
namespace {

// A connection must finish its handshake within this time (as on TCP).
constexpr auto kHandshakeWithin = std::chrono::seconds(10);
// rdma_resolve_addr / rdma_resolve_route timeouts.
constexpr int kResolveMs = 2000;
// Handshake buffers: one slot per connection being set up, strangers included.
constexpr std::size_t kHandshakeSlotBytes = 128;  // receive half, then send half
constexpr std::size_t kHalf = kHandshakeSlotBytes / 2;
constexpr int kStrangerSlots = 32;
constexpr std::size_t kRingInfoBytes = 24;
constexpr std::size_t kResponseBytes = auth::kMacBytes + kRingInfoBytes;
constexpr std::size_t kWelcomeBytes = wire::kWelcomeBytes + kRingInfoBytes;

void encode_ring(wire::ByteWriter& w, const RingInfo& ring) {
  w.u64(ring.address);
  w.u32(ring.rkey);
  w.u32(ring.slot_bytes);
  w.u16(ring.slots[0]);
  w.u16(ring.slots[1]);
  w.u32(ring.recv_credits);
}

RingInfo decode_ring(std::span<const std::byte> bytes) {
  wire::ByteReader r(bytes);
  RingInfo ring;
  ring.address = r.u64();
  ring.rkey = r.u32();
  ring.slot_bytes = r.u32();
  ring.slots[0] = r.u16();
  ring.slots[1] = r.u16();
  ring.recv_credits = r.u32();
  return ring;
}

sockaddr_storage socket_address(const std::string& host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || found == nullptr) {
    throw std::runtime_error("'" + host + "' is not a numeric IP address");
  }
  sockaddr_storage out{};
  std::memcpy(&out, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  return out;
}

std::string describe_address(const sockaddr* address) {
  if (address == nullptr) return "(unknown)";
  char host[NI_MAXHOST] = "?", service[NI_MAXSERV] = "?";
  const socklen_t length =
      address->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  ::getnameinfo(address, length, host, sizeof host, service, sizeof service,
                NI_NUMERICHOST | NI_NUMERICSERV);
  return std::string(host) + ":" + service;
}

void* as_context(std::uint32_t session) {
  return reinterpret_cast<void*>(static_cast<std::uintptr_t>(session));
}

}  // namespace

struct ConnectionManager::Session {
  enum class Side { connector, acceptor } side = Side::connector;
  enum class State {
    resolving,
    connecting,
    awaiting_response,
    awaiting_welcome,
    ready
  } state = State::resolving;
  std::uint32_t number = 0;
  int peer = -1;
  rdma_cm_id* id = nullptr;
  int slot = -1;
  QueueShape shape;
  std::array<std::byte, wire::kHelloBytes> hello{};
  auth::Nonce nonce{};  // the acceptor's
  Clock::time_point handshake_deadline{};
  Clock::time_point retry_at{};  // connector waiting to retry (id == nullptr)
  std::string remote;
};

ConnectionManager::ConnectionManager(int rank, int world_size, std::string token,
                                     const std::string& address)
    : rank_(rank),
      world_size_(world_size),
      token_(std::move(token)),
      address_(address),
      peer_ready_(static_cast<std::size_t>(world_size), false),
      last_error_(static_cast<std::size_t>(world_size)) {
  auto fail = [&](const std::string& what) {
    const int code = errno;
    if (listener_ != nullptr) rdma_destroy_id(listener_);
    if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
    throw CollectiveError(ErrorKind::backend_unavailable, site("listen"),
                          what + " failed: " + std::strerror(code),
                          "is the RDMA stack loaded (rdma_ucm) and /dev/infiniband/rdma_cm "
                          "accessible?");
  };
  channel_ = rdma_create_event_channel();
  if (channel_ == nullptr) fail("rdma_create_event_channel");
  const int flags = ::fcntl(channel_->fd, F_GETFL);
  if (::fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("fcntl(O_NONBLOCK)");
  if (rdma_create_id(channel_, &listener_, nullptr, RDMA_PS_TCP) != 0) fail("rdma_create_id");
  sockaddr_storage bind_address{};
  try {
    bind_address = socket_address(address, 0);
  } catch (const std::runtime_error& error) {
    errno = EINVAL;
    fail(std::string("listening address: ") + error.what() + "; rdma_bind_addr");
  }
  if (rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&bind_address)) != 0) {
    fail("rdma_bind_addr(" + address + ")");
  }
  if (rdma_listen(listener_, 64) != 0) fail("rdma_listen on " + address);
}

ConnectionManager::~ConnectionManager() {
  destroy_connections();
  if (listener_ != nullptr) rdma_destroy_id(listener_);
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
}

ibv_context* ConnectionManager::context() const { return listener_->verbs; }
std::uint16_t ConnectionManager::port() const { return ntohs(rdma_get_src_port(listener_)); }
int ConnectionManager::event_fd() const { return channel_->fd; }

ErrorSite ConnectionManager::site(std::string operation, int peer) const {
  return {
      .rank = rank_, .world_size = world_size_, .peer = peer, .operation = std::move(operation)};
}

void ConnectionManager::attach(ibv_pd* pd, ibv_cq* cq, QueueShape shape, Hooks hooks) {
  pd_ = pd;
  cq_ = cq;
  shape_ = shape;
  hooks_ = std::move(hooks);
  const int slots = world_size_ + kStrangerSlots;
  handshake_memory_ = std::make_unique<RegisteredMemory>(
      pd, static_cast<std::size_t>(slots) * kHandshakeSlotBytes, IBV_ACCESS_LOCAL_WRITE,
      "handshake buffers", site("register memory"));
  for (int s = slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

std::byte* ConnectionManager::slot_recv(const Session& s) const {
  return handshake_memory_->data() + static_cast<std::size_t>(s.slot) * kHandshakeSlotBytes;
}
std::byte* ConnectionManager::slot_send(const Session& s) const { return slot_recv(s) + kHalf; }

ConnectionManager::Session* ConnectionManager::session_of(rdma_cm_id* id) {
  if (id == nullptr) return nullptr;
  auto it =
      sessions_.find(static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(id->context)));
  return it == sessions_.end() ? nullptr : it->second.get();
}

std::string ConnectionManager::missing() const {
  std::string text;
  for (int peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_ || peer_ready_[static_cast<std::size_t>(peer)]) continue;
    text += (text.empty() ? "" : ", ") + std::to_string(peer);
    const auto& error = last_error_[static_cast<std::size_t>(peer)];
    if (!error.empty()) text += " (" + error + ")";
  }
  return text;
}

void ConnectionManager::start_connecting(const std::vector<HostPort>& table) {
  table_ = table;
  for (int peer = 0; peer < rank_; ++peer) connect(peer);
}

void ConnectionManager::connect(int peer) {
  auto session = std::make_unique<Session>();
  Session& s = *session;
  s.number = next_session_++;
  s.side = Session::Side::connector;
  s.peer = peer;
  s.remote = table_[static_cast<std::size_t>(peer)].to_string();
  s.handshake_deadline = Clock::time_point::max();
  sessions_[s.number] = std::move(session);
  try {
    if (rdma_create_id(channel_, &s.id, as_context(s.number), RDMA_PS_TCP) != 0) {
      throw std::runtime_error(std::string("rdma_create_id: ") + std::strerror(errno));
    }
    auto source = socket_address(address_, 0);
    auto target = socket_address(table_[static_cast<std::size_t>(peer)].host,
                                 table_[static_cast<std::size_t>(peer)].port);
    if (rdma_resolve_addr(s.id, reinterpret_cast<sockaddr*>(&source),
                          reinterpret_cast<sockaddr*>(&target), kResolveMs) != 0) {
      throw std::runtime_error(std::string("rdma_resolve_addr: ") + std::strerror(errno));
    }
  } catch (const std::runtime_error& error) {
    retry_later(s, error.what());
  }
}

void ConnectionManager::retry_later(Session& s, const std::string& why) {
  last_error_[static_cast<std::size_t>(s.peer)] = why;
  const int peer = s.peer;
  destroy(s);  // erases s
  auto session = std::make_unique<Session>();
  session->number = next_session_++;
  session->peer = peer;
  session->side = Session::Side::connector;
  session->retry_at = Clock::now() + std::chrono::milliseconds(200);
  session->handshake_deadline = Clock::time_point::max();
  sessions_[session->number] = std::move(session);
}

void ConnectionManager::drop(Session& s, const std::string& why) {
  if (s.side == Session::Side::acceptor) {
    log_warning("rank " + std::to_string(rank_) + ": refused a connection from " + s.remote +
                " (rdma_cm): " + why);
  }
  destroy(s);
}

void ConnectionManager::destroy(Session& s) {
  if (s.id != nullptr) {
    if (s.id->qp != nullptr) rdma_destroy_qp(s.id);
    doomed_.push_back(s.id);
    s.id = nullptr;
  }
  if (s.slot >= 0) free_slots_.push_back(s.slot);
  sessions_.erase(s.number);
}

void ConnectionManager::handle_events() {
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel_, &event) != 0) break;  // EAGAIN: nothing pending
    const int type = event->event;
    rdma_cm_id* id = event->id;
    const int status = event->status;
    std::vector<std::byte> data;
    if (event->param.conn.private_data != nullptr) {
      const auto* bytes = static_cast<const std::byte*>(event->param.conn.private_data);
      data.assign(bytes, bytes + event->param.conn.private_data_len);
    }
    try {
      dispatch(type, id, status, data);
    } catch (...) {
      rdma_ack_cm_event(event);
      throw;
    }
    rdma_ack_cm_event(event);
    for (rdma_cm_id* doomed : doomed_) rdma_destroy_id(doomed);
    doomed_.clear();
  }
  check_timers();
  for (rdma_cm_id* doomed : doomed_) rdma_destroy_id(doomed);
  doomed_.clear();
}

void ConnectionManager::check_timers() {
  const auto now = Clock::now();
  std::vector<std::uint32_t> expired, retry;
  for (auto& [number, s] : sessions_) {
    if (s->state != Session::State::ready && now >= s->handshake_deadline) {
      expired.push_back(number);
    }
    if (s->id == nullptr && s->side == Session::Side::connector && now >= s->retry_at) {
      retry.push_back(number);
    }
  }
  for (auto number : expired) {
    if (auto it = sessions_.find(number); it != sessions_.end()) {
      Session& s = *it->second;
      if (s.side == Session::Side::connector) {
        retry_later(s, "no handshake answer within 10 s");
      } else {
        drop(s, "no handshake within 10 s");
      }
    }
  }
  for (auto number : retry) {
    if (auto it = sessions_.find(number); it != sessions_.end()) {
      const int peer = it->second->peer;
      sessions_.erase(it);
      connect(peer);
    }
  }
}

void ConnectionManager::dispatch(int type, rdma_cm_id* id, int status,
                                 const std::vector<std::byte>& data) {
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST) return on_connect_request(id, data);
  if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) return on_device_removed();
  Session* s = session_of(id);
  if (s == nullptr) return;  // the listener's own events, or a session already gone
  const bool connector = s->side == Session::Side::connector;
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      return on_address_resolved(*s, id);
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
      return on_route_resolved(*s, id);
    case RDMA_CM_EVENT_ESTABLISHED:
      if (connector) on_established(*s, data);
      return;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
    case RDMA_CM_EVENT_CONNECT_ERROR: {
      const std::string what = std::string(rdma_event_str(static_cast<rdma_cm_event_type>(type))) +
                               " (status " + std::to_string(status) + ")";
      if (connector && s->state != Session::State::ready) return retry_later(*s, what);
      if (!connector && s->state != Session::State::ready) return drop(*s, what);
      return;
    }
    case RDMA_CM_EVENT_DISCONNECTED:
      if (s->state == Session::State::ready) {
        const int peer = s->peer;
        hooks_.lost(peer, "rank " + std::to_string(peer) +
                              " dropped its RDMA connection (rdma_cm DISCONNECTED): it exited or "
                              "crashed");
        return;
      }
      if (connector) return retry_later(*s, "disconnected during the handshake");
      return drop(*s, "disconnected during the handshake");
    default:
      return;
  }
}

void ConnectionManager::on_device_removed() {
  for (int peer = 0; peer < world_size_; ++peer) {
    if (peer_ready_[static_cast<std::size_t>(peer)]) {
      hooks_.lost(peer, "the RDMA device was removed (rdma_cm DEVICE_REMOVAL)");
    }
  }
}

// A connector's address is known: check it leaves through our device, then
// resolve the route.
void ConnectionManager::on_address_resolved(Session& session, rdma_cm_id* id) {
  Session* s = &session;
  if (id->verbs != context()) {
    throw CollectiveError(
        ErrorKind::backend_unavailable, site("connect to " + s->remote, s->peer),
        "the route to rank " + std::to_string(s->peer) + " leaves through RDMA device " +
            ibv_get_device_name(id->verbs->device) + ", but this rank listens on " +
            ibv_get_device_name(context()->device),
        "set RLX_IFNAME (or RLX_IB_DEVICE) so every rank uses addresses on one fabric");
  }
  if (rdma_resolve_route(id, kResolveMs) != 0) {
    retry_later(*s, std::string("rdma_resolve_route: ") + std::strerror(errno));
  }
}

// A connector's route is known: create the queue pair, post the handshake's
// receive, and connect with the Hello in the private data.
void ConnectionManager::on_route_resolved(Session& session, rdma_cm_id* id) {
  Session* s = &session;
  try {
    s->shape = create_queue_pair(id, pd_, cq_, shape_);
  } catch (const std::runtime_error& error) {
    throw CollectiveError(ErrorKind::backend_unavailable, site("connect", s->peer), error.what());
  }
  if (free_slots_.empty()) return retry_later(*s, "no free handshake buffer");
  s->slot = free_slots_.back();
  free_slots_.pop_back();
  if (post_recv(id->qp, encode_work_id({WorkKind::handshake_recv, s->number, 0}), slot_recv(*s),
                kHalf, handshake_memory_->lkey()) != 0) {
    return retry_later(*s, "cannot post the handshake receive");
  }
  const wire::Hello hello{static_cast<std::uint32_t>(world_size_),
                          static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(s->peer), 0,
                          auth::fresh_nonce()};
  s->hello = wire::encode_hello(hello);
  rdma_conn_param param{};
  param.private_data = s->hello.data();
  param.private_data_len = static_cast<std::uint8_t>(s->hello.size());
  param.retry_count = 7;
  param.rnr_retry_count = 7;  // "infinite": credits keep receivers posted anyway
  if (rdma_connect(id, &param) != 0) {
    return retry_later(*s, std::string("rdma_connect: ") + std::strerror(errno));
  }
  s->state = Session::State::connecting;
  s->handshake_deadline = Clock::now() + kHandshakeWithin;
}

void ConnectionManager::on_connect_request(rdma_cm_id* id, const std::vector<std::byte>& data) {
  auto session = std::make_unique<Session>();
  Session& s = *session;
  s.number = next_session_++;
  s.side = Session::Side::acceptor;
  s.id = id;
  s.remote = describe_address(rdma_get_peer_addr(id));
  s.state = Session::State::awaiting_response;
  s.handshake_deadline = Clock::now() + kHandshakeWithin;
  id->context = as_context(s.number);
  sessions_[s.number] = std::move(session);
  if (data.size() < wire::kHelloBytes) {
    rdma_reject(id, nullptr, 0);
    return drop(s, "no rlx hello in the connection request");
  }
  wire::Hello hello;
  try {
    std::copy_n(data.begin(), wire::kHelloBytes, s.hello.begin());
    hello = wire::decode_hello(s.hello);
  } catch (const wire::DecodeError& error) {
    rdma_reject(id, nullptr, 0);
    return drop(s, error.what());
  }
  if (auto why = wire::refusal_reason(hello, rank_, world_size_, 0); !why.empty()) {
    rdma_reject(id, nullptr, 0);
    return drop(s, why);
  }
  s.peer = static_cast<int>(hello.from_rank);
  if (id->verbs != context() || free_slots_.empty()) {
    rdma_reject(id, nullptr, 0);
    return drop(s, id->verbs != context() ? "it arrived on another RDMA device"
                                          : "too many connections in their handshake");
  }
  try {
    s.shape = create_queue_pair(id, pd_, cq_, shape_);
  } catch (const std::runtime_error& error) {
    rdma_reject(id, nullptr, 0);
    return drop(s, error.what());
  }
  s.slot = free_slots_.back();
  free_slots_.pop_back();
  if (post_recv(id->qp, encode_work_id({WorkKind::handshake_recv, s.number, 0}), slot_recv(s),
                kHalf, handshake_memory_->lkey()) != 0) {
    rdma_reject(id, nullptr, 0);
    return drop(s, "cannot post the handshake receive");
  }
  s.nonce = auth::fresh_nonce();
  const auto challenge =
      wire::encode_challenge({s.nonce, wire::acceptor_mac(token_, s.hello, s.nonce)});
  rdma_conn_param param{};
  param.private_data = challenge.data();
  param.private_data_len = static_cast<std::uint8_t>(challenge.size());
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_accept(id, &param) != 0) drop(s, std::string("rdma_accept: ") + std::strerror(errno));
}

void ConnectionManager::on_established(Session& s, const std::vector<std::byte>& data) {
  const ErrorSite where = site("connect to " + s.remote, s.peer);
  if (data.size() < wire::kChallengeBytes) {
    throw CollectiveError(ErrorKind::protocol_violation, where,
                          "the acceptor sent no rlx challenge (" + std::to_string(data.size()) +
                              " bytes of private data)");
  }
  wire::Challenge challenge;
  try {
    challenge = wire::decode_challenge(
        std::span<const std::byte, wire::kChallengeBytes>(data.data(), wire::kChallengeBytes));
  } catch (const wire::DecodeError& error) {
    throw CollectiveError(ErrorKind::protocol_violation, where, error.what());
  }
  if (!auth::equal(wire::acceptor_mac(token_, s.hello, challenge.nonce), challenge.mac)) {
    throw CollectiveError(ErrorKind::protocol_violation, where,
                          "the peer does not hold this job's token",
                          "every rank needs the same RLX_JOB_TOKEN (rlxrun sets it)");
  }
  hooks_.post_receives(s.peer, s.id->qp);
  wire::ByteWriter w;
  w.raw(wire::connector_mac(token_, s.hello, challenge.nonce));
  encode_ring(w, hooks_.local_ring(s.peer));
  std::copy(w.bytes().begin(), w.bytes().end(), slot_send(s));
  if (post_send(s.id->qp, encode_work_id({WorkKind::handshake_send, s.number, 0}), slot_send(s),
                kResponseBytes, handshake_memory_->lkey(), false) != 0) {
    throw CollectiveError(ErrorKind::peer_lost, where, "cannot post the handshake response");
  }
  s.state = Session::State::awaiting_welcome;
}

void ConnectionManager::on_completion(const ibv_wc& wc) {
  const WorkId work = decode_work_id(wc.wr_id);
  auto it = sessions_.find(work.owner);
  if (it == sessions_.end()) return;  // a session already torn down
  Session& s = *it->second;
  if (wc.status != IBV_WC_SUCCESS) {
    if (s.state == Session::State::ready) return;  // the data path reports its own failures
    const std::string why = std::string(verb_name(work.kind)) + " failed: " + describe_status(wc);
    if (s.side == Session::Side::connector) return retry_later(s, why);
    return drop(s, why);
  }
  if (work.kind != WorkKind::handshake_recv) return;
  if (s.side == Session::Side::acceptor && s.state == Session::State::awaiting_response) {
    return on_response(s, wc.byte_len);
  }
  if (s.side == Session::Side::connector && s.state == Session::State::awaiting_welcome) {
    return on_welcome(s, wc.byte_len);
  }
}

void ConnectionManager::on_response(Session& s, std::uint32_t bytes) {
  const std::span<const std::byte> got(slot_recv(s), std::min<std::size_t>(bytes, kHalf));
  if (got.size() != kResponseBytes ||
      !auth::equal(wire::connector_mac(token_, s.hello, s.nonce), got.first(auth::kMacBytes))) {
    return drop(s, "wrong job token");
  }
  if (peer_ready_[static_cast<std::size_t>(s.peer)]) {
    return drop(s, "duplicate connection from rank " + std::to_string(s.peer) +
                       ": it arrived after the mesh was complete");
  }
  const RingInfo remote = decode_ring(got.subspan(auth::kMacBytes));
  hooks_.post_receives(s.peer, s.id->qp);
  wire::ByteWriter w;
  w.raw(wire::encode_welcome());
  encode_ring(w, hooks_.local_ring(s.peer));
  std::copy(w.bytes().begin(), w.bytes().end(), slot_send(s));
  if (post_send(s.id->qp, encode_work_id({WorkKind::handshake_send, s.number, 0}), slot_send(s),
                kWelcomeBytes, handshake_memory_->lkey(), false) != 0) {
    return drop(s, "cannot post the welcome");
  }
  s.state = Session::State::ready;
  peer_ready_[static_cast<std::size_t>(s.peer)] = true;
  ++ready_count_;
  hooks_.ready({s.peer, s.id->qp, s.shape, remote});
}

void ConnectionManager::on_welcome(Session& s, std::uint32_t bytes) {
  const std::span<const std::byte> got(slot_recv(s), std::min<std::size_t>(bytes, kHalf));
  if (got.size() != kWelcomeBytes ||
      !wire::is_welcome(
          std::span<const std::byte, wire::kWelcomeBytes>(got.data(), wire::kWelcomeBytes))) {
    throw CollectiveError(ErrorKind::protocol_violation, site("connect to " + s.remote, s.peer),
                          "no welcome after the handshake");
  }
  s.state = Session::State::ready;
  peer_ready_[static_cast<std::size_t>(s.peer)] = true;
  ++ready_count_;
  last_error_[static_cast<std::size_t>(s.peer)].clear();
  hooks_.ready({s.peer, s.id->qp, s.shape, decode_ring(got.subspan(wire::kWelcomeBytes))});
}

void ConnectionManager::destroy_connections() {
  for (auto& [number, s] : sessions_) {
    if (s->id != nullptr && s->state == Session::State::ready) rdma_disconnect(s->id);
  }
  for (auto& [number, s] : sessions_) {
    if (s->id == nullptr) continue;
    if (s->id->qp != nullptr) rdma_destroy_qp(s->id);
    doomed_.push_back(s->id);
    s->id = nullptr;
  }
  sessions_.clear();
  // Events still queued for these ids must be acked before they can go.
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (channel_ == nullptr || rdma_get_cm_event(channel_, &event) != 0) break;
    rdma_ack_cm_event(event);
  }
  for (rdma_cm_id* id : doomed_) rdma_destroy_id(id);
  doomed_.clear();
}

}  // namespace rlx::verbs
