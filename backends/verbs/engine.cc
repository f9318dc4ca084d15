#include "backends/verbs/engine.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "collectives/reduce.h"
#include "transport/wire.h"

namespace rlx::verbs {
namespace {

// Eager buffers: a header and up to kEagerPayload bytes of a message.
constexpr std::size_t kEagerBytes = 4096;
constexpr std::size_t kEagerPayload = kEagerBytes - kPacketHeaderBytes;
// Receive buffers per peer: kRecvCredits for data (SENDs and ring chunks, both
// consume one), the rest for control messages (credits, abort, close), which
// need no credit. Control messages in flight are bounded by the ring slots
// and credit batches they return (see flush_credits), well below kRecvReserve.
constexpr std::uint32_t kRecvCredits = 64;
constexpr std::uint32_t kRecvReserve = 32;
constexpr std::uint32_t kRecvBuffers = kRecvCredits + kRecvReserve;
constexpr std::uint32_t kSendBuffers = kRecvBuffers;
constexpr std::uint32_t kSendDepth = 128;
constexpr std::uint32_t kRecvDepth = kRecvBuffers + 4;  // + the handshake's receive
// Ring slots: a chunk is a header and kChunkPayload bytes, a multiple of every
// element size, so a reducing receive never sees half an element.
constexpr std::size_t kSlotBytes = 256 * 1024;
constexpr std::size_t kChunkPayload = kSlotBytes - 128;
constexpr std::array<std::uint32_t, kStreams> kSlots = {4, 8};
constexpr std::uint32_t kSlotsPerPeer = kSlots[0] + kSlots[1];
constexpr std::uint32_t kMaxSlots = 8;
// Return receive credits once this many are owed (ring slots: at once).
constexpr std::uint64_t kRecvCreditBatch = kRecvCredits / 4;
// The progress thread polls this many times after its last completion before
// it arms the completion channel and sleeps (counted, not timed: see coarse_now).
constexpr std::uint32_t kProgressSpinPolls = 32;
// A sleeper re-checks at least this often, whatever wakes it.
constexpr auto kNap = std::chrono::milliseconds(20);
constexpr int kIdlePollMs = 100;
// How often a progress thread standing aside checks whether the caller left:
// soon after it took over, less often the longer callers keep driving (each
// look wakes a thread that takes a core from them).
constexpr int kStandAsideMinMs = 1;
constexpr int kStandAsideMaxMs = 16;
// While it polls, the progress thread also looks at rdma_cm this often.
constexpr std::uint32_t kCmEverySteps = 64;
// At shutdown, how long to wait for the peers' own close.
constexpr auto kLinger = std::chrono::seconds(2);

constexpr std::size_t kLocalPerPeer =
    (kRecvBuffers + kSendBuffers) * kEagerBytes + kSlotsPerPeer * kSlotBytes;
constexpr std::size_t kRingPerPeer = kSlotsPerPeer * kSlotBytes;

std::uint32_t slot_index(Stream stream, std::uint32_t slot) {
  return (stream == Stream::p2p ? 0 : kSlots[0]) + slot;
}

// CLOCK_MONOTONIC_COARSE (the steady clock's timebase) is always served by
// the vDSO, while a fine clock read may be a system call and a device access
// (HPET under QEMU TCG: tens of microseconds, more than a small message's
// round trip). It is good to a clock tick (1-4 ms): plenty for deadlines, and
// it bounds the spin window to at most a tick beyond RLX_VERBS_SPIN_US.
Clock::time_point coarse_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

// How far the coarse clock moves at once (its resolution: a clock tick).
Clock::duration coarse_tick() {
  static const Clock::duration tick = [] {
    timespec ts{};
    ::clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
    return std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                       std::chrono::nanoseconds(ts.tv_nsec));
  }();
  return tick;
}

bool is_peer_failure(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_WR_FLUSH_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:
      return true;
    default:
      return false;
  }
}

}  // namespace

struct Engine::Held {
  std::uint32_t slot = 0;
  std::uint32_t bytes = 0;  // payload
  PacketHeader header;
};

struct Engine::Peer {
  int rank = -1;
  bool ready = false;
  bool closed = false;  // the peer said it is shutting down
  ibv_qp* qp = nullptr;
  QueueShape shape;
  RingInfo remote;
  std::byte* recv = nullptr;     // kRecvBuffers x kEagerBytes
  std::byte* send = nullptr;     // kSendBuffers x kEagerBytes
  std::byte* staging = nullptr;  // kSlotsPerPeer x kSlotBytes, mirrors the peer's ring
  std::byte* ring = nullptr;     // kSlotsPerPeer x kSlotBytes, written by the peer
  std::vector<std::uint32_t> free_send;
  std::array<std::uint32_t, kSendBuffers> send_length{};
  std::array<std::array<bool, kMaxSlots>, kStreams> staging_busy{};
  std::uint32_t sq_outstanding = 0;

  // What this rank may still post: counts posted vs. the peer's credits.
  std::uint64_t data_posted = 0;
  std::uint64_t recv_credit = 0;  // the peer's cumulative count
  std::array<std::uint64_t, kStreams> ring_posted{};
  std::array<std::uint64_t, kStreams> ring_credit{};
  std::array<std::uint32_t, kStreams> ring_next{};

  // What this rank owes the peer.
  std::uint64_t recv_reposted = 0, recv_reported = 0;
  std::array<std::uint64_t, kStreams> ring_freed{}, ring_reported{};
  std::array<std::uint32_t, kStreams> ring_expect{};

  // Point-to-point: ordering and the large message being assembled.
  std::uint64_t p2p_send_sequence = 0;
  bool p2p_sending = false;
  std::uint64_t p2p_expected = 0;
  bool assembling = false;
  bool assembling_awaited = false;  // a receiver waited for it when it began: no cap
  wire::FrameHeader assembling_frame;
  std::vector<std::byte> assembly;
  std::size_t assembled = 0;

  // A receiver waiting for this peer's next message with `tag`, with nothing
  // older for it in the mailbox: the message goes straight to it.
  struct Waiter {
    Tag tag = 0;
    std::optional<std::vector<std::byte>> message;
  };
  Waiter* waiter = nullptr;

  // Collective chunks that arrived before their step was posted, in order.
  std::array<Held, kMaxSlots> held{};
  std::uint32_t held_head = 0, held_count = 0;
  struct Expectation {
    bool active = false;
    bool started = false;
    CollectiveCall call;
    std::uint32_t step = 0;
    std::span<std::byte> into;
    bool reduce = false;
    std::size_t got = 0;
  } expect;

  std::uint64_t send_credits() const { return recv_credit + remote.recv_credits - data_posted; }
  std::uint64_t ring_credits(Stream s) const {
    const auto i = static_cast<std::size_t>(s);
    return ring_credit[i] + remote.slots[i] - ring_posted[i];
  }
  std::byte* recv_buffer(std::uint32_t index) const { return recv + index * kEagerBytes; }
  std::byte* send_buffer(std::uint32_t index) const { return send + index * kEagerBytes; }
  std::byte* ring_slot(Stream s, std::uint32_t slot) const {
    return ring + slot_index(s, slot) * kSlotBytes;
  }
  std::byte* staging_slot(Stream s, std::uint32_t slot) const {
    return staging + slot_index(s, slot) * kSlotBytes;
  }
};

Engine::Engine(Spec spec, Device& device, Mailbox& mailbox, FailureLatch& latch)
    : spec_(spec),
      caller_spin_(spec.caller_spin),
      device_(device),
      mailbox_(mailbox),
      latch_(latch) {
  const auto n = static_cast<std::size_t>(spec_.world_size);
  const ErrorSite where = site("register memory");
  local_ = std::make_unique<RegisteredMemory>(
      device.pd(), n * kLocalPerPeer, IBV_ACCESS_LOCAL_WRITE, "eager and staging buffers", where);
  ring_ = std::make_unique<RegisteredMemory>(device.pd(), n * kRingPerPeer,
                                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
                                             "receive rings", where);
  for (std::size_t r = 0; r < n; ++r) {
    auto p = std::make_unique<Peer>();
    p->rank = static_cast<int>(r);
    std::byte* base = local_->data() + r * kLocalPerPeer;
    p->recv = base;
    p->send = p->recv + kRecvBuffers * kEagerBytes;
    p->staging = p->send + kSendBuffers * kEagerBytes;
    p->ring = ring_->data() + r * kRingPerPeer;
    for (std::uint32_t i = kSendBuffers; i-- > 0;) p->free_send.push_back(i);
    peers_.push_back(std::move(p));
  }
  sends_.reserve(64);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

Engine::~Engine() {
  stop();
  if (stop_fd_ >= 0) ::close(stop_fd_);
}

QueueShape Engine::queue_shape() { return {kSendDepth, kRecvDepth, 0}; }

int Engine::cq_entries(int world_size) {
  return (world_size - 1) * static_cast<int>(kSendDepth + kRecvDepth) + 2 * (world_size + 40);
}

ErrorSite Engine::site(std::string_view operation, int peer, std::string sizes) const {
  return {.rank = spec_.rank,
          .world_size = spec_.world_size,
          .peer = peer,
          .operation = std::string(operation),
          .sizes = std::move(sizes)};
}

RingInfo Engine::local_ring(int peer) const {
  const Peer& p = *peers_[static_cast<std::size_t>(peer)];
  return {reinterpret_cast<std::uintptr_t>(p.ring),
          ring_->rkey(),
          static_cast<std::uint32_t>(kSlotBytes),
          {static_cast<std::uint16_t>(kSlots[0]), static_cast<std::uint16_t>(kSlots[1])},
          kRecvCredits};
}

void Engine::post_receives(int peer, ibv_qp* qp) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  p.qp = qp;
  for (std::uint32_t i = 0; i < kRecvBuffers; ++i) repost(p, i);
}

void Engine::on_ready(const PeerLink& link) {
  Peer& p = *peers_[static_cast<std::size_t>(link.peer)];
  const RingInfo mine = local_ring(link.peer);
  if (link.remote.slot_bytes != mine.slot_bytes || link.remote.slots[0] != mine.slots[0] ||
      link.remote.slots[1] != mine.slots[1] || link.remote.recv_credits != mine.recv_credits) {
    fail(CollectiveError(ErrorKind::protocol_violation, site("connect", link.peer),
                         "rank " + std::to_string(link.peer) +
                             " uses another ring layout (a different rlx build)",
                         "run the same rlx build on every rank"),
         false);
    return;
  }
  p.qp = link.qp;
  p.shape = link.shape;
  p.remote = link.remote;
  p.ready = true;
}

void Engine::on_lost(int peer, const std::string& why) {
  Peer& p = *peers_[static_cast<std::size_t>(peer)];
  if (!p.ready || p.closed || closing_) return;
  poll_completions();  // a close sent just before the disconnect explains it
  if (p.closed || closing_) return;
  fail(CollectiveError(ErrorKind::peer_lost, site("receive", peer), why,
                       "rank " + std::to_string(peer) + "'s own output says why it stopped"),
       true);
}

void Engine::set_handshake_handler(std::function<void(const ibv_wc&)> handler) {
  handshake_ = std::move(handler);
}

void Engine::run_locked(const std::function<void()>& fn) {
  std::lock_guard lock(mutex_);
  fn();
  poll_completions();
}

Engine::Peer& Engine::peer(int rank, std::string_view operation) {
  Peer& p = *peers_[static_cast<std::size_t>(rank)];
  if (!p.ready) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation, rank),
                          "no connection to rank " + std::to_string(rank));
  }
  if (p.closed) {
    throw CollectiveError(ErrorKind::peer_lost, site(operation, rank),
                          "rank " + std::to_string(rank) + " has shut down its transport");
  }
  return p;
}

// ---------------------------------------------------------------- waiting --

// A caller inside the engine: it holds the lock and, while awake, is the
// rank's only poller (see callers_). From entry to return, not only while it
// waits: between two waits it still holds the lock (posting, for one), and a
// progress thread that woke then would only spin on the lock. A caller that
// goes to sleep kicks the progress thread awake to take over; one that
// returns does not (it would only compete with the next call for the cores):
// the progress thread notices within its stand-aside interval.
class Engine::Caller {
 public:
  explicit Caller(Engine& engine) : engine_(engine) {
    engine_.callers_.fetch_add(1);
    lock = std::unique_lock(engine_.mutex_);
  }
  ~Caller() {
    if (lock.owns_lock()) lock.unlock();
    engine_.callers_.fetch_sub(1);
  }
  Caller(const Caller&) = delete;
  Caller& operator=(const Caller&) = delete;

  // Sleeps until progress is signalled or `until`, with the progress thread polling meanwhile.
  void sleep_until(Deadline until) {
    if (engine_.callers_.fetch_sub(1) == 1) {
      const std::uint64_t one = 1;
      (void)!::write(engine_.stop_fd_, &one, sizeof one);
    }
    engine_.progressed_.wait_until(lock, until);
    engine_.callers_.fetch_add(1);
  }

  std::unique_lock<std::mutex> lock;

 private:
  Engine& engine_;
};

template <class Done>
bool Engine::drive(Caller& caller, Deadline deadline, bool check_latch, Done done) {
  // The spin is timed on the coarse clock, which only moves once a tick:
  // waiting a tick more makes sure a short wait is not cut off at a tick.
  auto spin_until = coarse_now() + caller_spin_ + coarse_tick();
  for (;;) {
    if (check_latch) latch_.rethrow_if_tripped();
    if (cm_pending_.load(std::memory_order_relaxed)) handle_cm_events();
    if (done()) return true;
    if (poll_completions()) {
      progressed_.notify_all();
      spin_until = coarse_now() + caller_spin_ + coarse_tick();
      continue;
    }
    const auto now = coarse_now();
    if (now >= deadline) return false;
    if (now <= spin_until) {
      // Another caller of this rank may want the lock; when ranks share
      // cores, so may the device's own work (rxe runs in the kernel).
      caller.lock.unlock();
      if (spec_.yield_while_spinning) std::this_thread::yield();
      caller.lock.lock();
      continue;
    }
    caller.sleep_until(std::min<Deadline>(deadline, Clock::now() + kNap));
  }
}

void Engine::start(int cm_fd, std::function<void()> cm_events) {
  cm_fd_ = cm_fd;
  cm_events_ = std::move(cm_events);
  thread_ = std::thread([this] { run(); });
}

void Engine::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  const std::uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  thread_.join();
}

void Engine::run() {
  enum class Step { busy, progressed, idle };
  // rdma_cm events (connections, disconnects, strangers) and the connection
  // manager's timers are handled by whoever holds the lock next and sees
  // cm_pending_: usually a spinning caller, which has the lock nearly always.
  // Asking an empty channel is a failing system call, so it is flagged only
  // when its fd is readable or a while has passed.
  std::uint32_t steps = 0;
  // One look at the CQ, unless a caller holds the lock.
  auto step = [this, &steps](bool arm) {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (!lock.owns_lock()) return Step::busy;
    if (++steps % kCmEverySteps == 0) cm_pending_.store(true);
    handle_cm_events();
    bool any = false;
    try {
      if (arm) ibv_req_notify_cq(device_.cq(), 0);
      any = poll_completions();
    } catch (const CollectiveError& error) {
      fail(error, false);
      any = true;
    }
    if (any) progressed_.notify_all();
    return any ? Step::progressed : Step::idle;
  };
  auto drain_kicks = [this] {
    std::uint64_t kicks = 0;
    (void)!::read(stop_fd_, &kicks, sizeof kicks);
  };
  int stand_aside_ms = kStandAsideMinMs;
  std::uint32_t idle_polls = 0;
  while (!stopping_.load()) {
    if (callers_.load() > 0) {
      // A caller polls the CQ and handles rdma_cm; this thread only flags
      // events for it (not again while a flag waits) until it sleeps or
      // leaves. Each look that finds it still there looks later next time.
      pollfd fds[2] = {{stop_fd_, POLLIN, 0}, {cm_fd_, POLLIN, 0}};
      const nfds_t watched = cm_pending_.load() ? 1 : 2;
      const int ready = ::poll(fds, watched, stand_aside_ms);
      if ((fds[0].revents & POLLIN) != 0) drain_kicks();
      if (ready == 0 || (fds[1].revents & POLLIN) != 0) cm_pending_.store(true);
      stand_aside_ms = std::min(2 * stand_aside_ms, kStandAsideMaxMs);
      idle_polls = 0;
      continue;
    }
    stand_aside_ms = kStandAsideMinMs;
    const Step polled = step(false);
    if (polled != Step::idle || ++idle_polls < kProgressSpinPolls) {
      if (polled == Step::progressed) idle_polls = 0;
      std::this_thread::yield();
      continue;
    }
    // Arm the channel, then look once more: a completion between the last
    // poll and the arming would otherwise raise no event.
    if (step(true) != Step::idle) {
      idle_polls = 0;
      continue;
    }
    pollfd fds[3] = {
        {device_.channel()->fd, POLLIN, 0}, {cm_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    ::poll(fds, 3, kIdlePollMs);
    if ((fds[0].revents & POLLIN) != 0) {
      ibv_cq* cq = nullptr;
      void* context = nullptr;
      if (ibv_get_cq_event(device_.channel(), &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
    }
    if ((fds[2].revents & POLLIN) != 0) drain_kicks();
    cm_pending_.store(true);  // events, or the timers' turn after a quiet while
    idle_polls = 0;
  }
}

void Engine::handle_cm_events() {
  if (!cm_pending_.load(std::memory_order_relaxed) || !cm_pending_.exchange(false)) return;
  try {
    if (cm_events_) cm_events_();
  } catch (const CollectiveError& error) {
    fail(error, false);
  }
}

// ------------------------------------------------------------ completions --

bool Engine::poll_completions() {
  std::array<ibv_wc, 32> wcs;
  const int n = ibv_poll_cq(device_.cq(), static_cast<int>(wcs.size()), wcs.data());
  if (n < 0) {
    fail(CollectiveError(ErrorKind::protocol_violation, site("poll completion queue"),
                         "ibv_poll_cq failed (" + std::to_string(n) + ")"),
         true);
    return true;
  }
  for (int i = 0; i < n; ++i) dispatch(wcs[static_cast<std::size_t>(i)]);
  if (n > 0) flush_credits();
  return n > 0;
}

void Engine::dispatch(const ibv_wc& wc) {
  const WorkId work = decode_work_id(wc.wr_id);
  switch (work.kind) {
    case WorkKind::handshake_recv:
    case WorkKind::handshake_send:
      if (handshake_) handshake_(wc);
      return;
    case WorkKind::recv:
    case WorkKind::send:
    case WorkKind::write:
      break;
    default:
      return;
  }
  if (work.owner >= peers_.size()) return;
  Peer& p = *peers_[work.owner];
  if (work.kind == WorkKind::recv) return on_recv(p, wc, work.index);
  on_send_done(p, wc, static_cast<std::uint32_t>(work.kind), work.index);
}

void Engine::completion_failed(Peer& p, std::uint32_t kind, const ibv_wc& wc, std::size_t bytes) {
  if (latch_.tripped() || closing_ || p.closed) return;  // flushes after the end is known
  const auto verb = verb_name(static_cast<WorkKind>(kind));
  const bool peer_side = is_peer_failure(wc.status);
  fail(CollectiveError(
           peer_side ? ErrorKind::peer_lost : ErrorKind::protocol_violation,
           site(verb, p.rank, bytes > 0 ? format_bytes(bytes) : std::string()),
           std::string(verb) + (bytes > 0 ? " of " + format_bytes(bytes) : std::string()) +
               " with rank " + std::to_string(p.rank) + " failed: " + describe_status(wc),
           peer_side ? "rank " + std::to_string(p.rank) +
                           "'s own output says why it stopped; a retry error also means the "
                           "fabric stopped delivering"
                     : std::string("this is a local verbs error: please report it")),
       true);
}

void Engine::repost(Peer& p, std::uint32_t index) {
  if (p.qp == nullptr) return;
  const int rc =
      post_recv(p.qp, encode_work_id({WorkKind::recv, static_cast<std::uint32_t>(p.rank), index}),
                p.recv_buffer(index), kEagerBytes, local_->lkey());
  if (rc != 0 && !latch_.tripped() && !closing_) {
    fail(CollectiveError(ErrorKind::peer_lost, site("RECV", p.rank),
                         std::string("ibv_post_recv failed: ") + std::strerror(rc)),
         true);
  }
}

void Engine::on_recv(Peer& p, const ibv_wc& wc, std::uint32_t index) {
  if (wc.status != IBV_WC_SUCCESS) return completion_failed(p, wc.wr_id >> 56, wc, 0);
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    repost(p, index);
    ++p.recv_reposted;
    return on_chunk(p, ntohl(wc.imm_data), wc.byte_len);
  }
  on_eager(p, wc, index);
}

void Engine::violation(Peer& p, const std::string& what) {
  fail(CollectiveError(ErrorKind::protocol_violation, site("receive", p.rank),
                       "from rank " + std::to_string(p.rank) + ": " + what),
       true);
}

void Engine::on_eager(Peer& p, const ibv_wc& wc, std::uint32_t index) {
  const std::byte* buffer = p.recv_buffer(index);
  if (wc.byte_len < kPacketHeaderBytes || wc.byte_len > kEagerBytes) {
    repost(p, index);
    return violation(p, "a " + std::to_string(wc.byte_len) + "-byte SEND");
  }
  PacketHeader h;
  try {
    h = decode_packet(std::span<const std::byte, kPacketHeaderBytes>(buffer, kPacketHeaderBytes));
  } catch (const wire::DecodeError& error) {
    repost(p, index);
    return violation(p, error.what());
  }
  apply_credits(p, h.credits);
  const std::size_t bytes = wc.byte_len - kPacketHeaderBytes;
  if (h.type == PacketType::credit) return repost(p, index);
  switch (h.frame.kind) {
    case wire::FrameKind::message: {
      std::vector<std::byte> message(buffer + kPacketHeaderBytes,
                                     buffer + kPacketHeaderBytes + bytes);
      repost(p, index);
      ++p.recv_reposted;
      if (h.frame.length != bytes || h.frame.tag > kMaxTag || h.frame.sequence != p.p2p_expected ||
          p.assembling) {
        return violation(p, "a malformed message (tag " + std::to_string(h.frame.tag) +
                                ", sequence " + std::to_string(h.frame.sequence) + ", expected " +
                                std::to_string(p.p2p_expected) + ")");
      }
      ++p.p2p_expected;
      return deliver(p, h.frame.tag, std::move(message));
    }
    case wire::FrameKind::abort: {
      const std::string text(reinterpret_cast<const char*>(buffer + kPacketHeaderBytes), bytes);
      repost(p, index);
      const auto kind = h.frame.tag <= static_cast<std::uint32_t>(ErrorKind::resource_exhausted)
                            ? static_cast<ErrorKind>(h.frame.tag)
                            : ErrorKind::protocol_violation;
      return fail(CollectiveError(kind, site("(remote failure)", p.rank),
                                  "rank " + std::to_string(p.rank) + " failed: " + text),
                  false);
    }
    case wire::FrameKind::close:
      repost(p, index);
      p.closed = true;
      ++mailbox_events_;
      mailbox_.fail(p.rank,
                    std::make_exception_ptr(CollectiveError(
                        ErrorKind::peer_lost, site("recv_bytes", p.rank),
                        "rank " + std::to_string(p.rank) + " has shut down its transport")));
      return;
    case wire::FrameKind::collective:
      repost(p, index);
      return violation(p, "a collective step arrived as a SEND");
    case wire::FrameKind::ping:
    case wire::FrameKind::pong:
      repost(p, index);
      return violation(p, "a liveness probe, which only TCP's point-to-point connection carries");
  }
}

void Engine::on_chunk(Peer& p, std::uint32_t imm, std::uint32_t bytes) {
  const std::uint32_t stream_index = imm >> 16, slot = imm & 0xffff;
  if (stream_index >= kStreams || slot != p.ring_expect[stream_index]) {
    return violation(p, "a ring write to stream " + std::to_string(stream_index) + " slot " +
                            std::to_string(slot) + " out of order");
  }
  const auto stream = static_cast<Stream>(stream_index);
  p.ring_expect[stream_index] = (slot + 1) % kSlots[stream_index];
  if (bytes < kPacketHeaderBytes || bytes > kSlotBytes) {
    return violation(p, "a " + std::to_string(bytes) + "-byte ring write");
  }
  const std::byte* base = p.ring_slot(stream, slot);
  PacketHeader h;
  try {
    h = decode_packet(std::span<const std::byte, kPacketHeaderBytes>(base, kPacketHeaderBytes));
  } catch (const wire::DecodeError& error) {
    return violation(p, error.what());
  }
  apply_credits(p, h.credits);
  if (h.stream != stream || h.type != PacketType::frame) {
    return violation(p, "a ring chunk whose header names another stream");
  }
  const std::uint32_t payload = bytes - static_cast<std::uint32_t>(kPacketHeaderBytes);
  if (stream == Stream::p2p) {
    on_p2p_chunk(p, h, base + kPacketHeaderBytes, payload);
    ++p.ring_freed[0];
    return;
  }
  if (h.frame.kind != wire::FrameKind::collective) {
    return violation(p, "a non-collective frame on the collective stream");
  }
  p.held[(p.held_head + p.held_count) % kMaxSlots] = {slot, payload, h};
  ++p.held_count;
  consume_held(p);
}

void Engine::on_p2p_chunk(Peer& p, const PacketHeader& h, const std::byte* data,
                          std::size_t bytes) {
  if (h.frame.kind != wire::FrameKind::message) {
    return violation(p, "a non-message frame on the message stream");
  }
  if (h.offset == 0) {
    if (p.assembling || h.frame.tag > kMaxTag || h.frame.sequence != p.p2p_expected) {
      return violation(p, "a message (tag " + std::to_string(h.frame.tag) + ", sequence " +
                              std::to_string(h.frame.sequence) + ") out of order");
    }
    ++p.p2p_expected;
    // A receiver already waiting takes a message of any length; only bytes
    // held for nobody count against the cap.
    const bool awaited = (p.waiter != nullptr && p.waiter->tag == h.frame.tag) ||
                         mailbox_.awaited(p.rank, h.frame.tag);
    if (!awaited && h.frame.length > mailbox_.byte_cap()) {
      return fail(CollectiveError(ErrorKind::resource_exhausted, site("receive", p.rank),
                                  "rank " + std::to_string(p.rank) + " sent a " +
                                      format_bytes(h.frame.length) + " message (tag " +
                                      std::to_string(h.frame.tag) +
                                      ") that no recv_bytes waited for; at most "
                                      "RLX_UNEXPECTED_BYTES = " +
                                      format_bytes(mailbox_.byte_cap()) + " can be held for later"),
                  true);
    }
    p.assembling = true;
    p.assembling_awaited = awaited;
    p.assembling_frame = h.frame;
    p.assembly.resize(h.frame.length);
    p.assembled = 0;
  } else if (!p.assembling || h.offset != p.assembled ||
             h.frame.sequence != p.assembling_frame.sequence) {
    return violation(p, "a message chunk at offset " + std::to_string(h.offset) + " out of order");
  }
  if (bytes > p.assembly.size() - p.assembled) {
    return violation(p, "a message chunk beyond the message's length");
  }
  std::memcpy(p.assembly.data() + p.assembled, data, bytes);
  p.assembled += bytes;
  if (p.assembled == p.assembly.size()) {
    p.assembling = false;
    deliver(p, p.assembling_frame.tag, std::move(p.assembly), p.assembling_awaited);
    p.assembly = {};
  }
}

void Engine::deliver(Peer& p, Tag tag, std::vector<std::byte> message, bool awaited) {
  ++mailbox_events_;
  if (p.waiter != nullptr && p.waiter->tag == tag) {
    p.waiter->message = std::move(message);
    p.waiter = nullptr;
    return;
  }
  if (!mailbox_.deliver(p.rank, tag, std::move(message), awaited)) {
    fail(CollectiveError(ErrorKind::resource_exhausted, site("receive", p.rank),
                         "messages received but not yet passed to recv_bytes exceed "
                         "RLX_UNEXPECTED_BYTES = " +
                             format_bytes(mailbox_.byte_cap())),
         true);
  }
}

void Engine::consume_held(Peer& p) {
  auto& e = p.expect;
  while (p.held_count > 0 && e.active && !latch_.tripped()) {
    const Held& c = p.held[p.held_head];
    if (c.header.offset == 0) {
      const CollectiveCall theirs = wire::call_of(c.header.frame);
      const bool same_step = c.header.frame.tag == e.step && c.header.frame.length == e.into.size();
      if (e.started) return violation(p, "a collective step began before the last one ended");
      if (!(theirs == e.call) || !same_step) {
        const auto& h = c.header.frame;
        return fail(
            CollectiveError(
                ErrorKind::mismatch, site(e.call.describe(), p.rank),
                "this rank called " + e.call.describe() + " but rank " + std::to_string(p.rank) +
                    " called " + theirs.describe() +
                    (theirs == e.call
                         ? " (step " + std::to_string(h.tag) + " of " + format_bytes(h.length) +
                               ", expected step " + std::to_string(e.step) + " of " +
                               format_bytes(e.into.size()) + ")"
                         : ""),
                "every rank must call the same collectives in the same order with the same sizes"),
            true);
      }
      e.started = true;
    } else if (!e.started || c.header.offset != e.got) {
      return violation(
          p, "a collective chunk at offset " + std::to_string(c.header.offset) + " out of order");
    }
    if (c.bytes > e.into.size() - e.got) {
      return violation(p, "a collective chunk beyond its step's length");
    }
    const std::byte* data = p.ring_slot(Stream::collective, c.slot) + kPacketHeaderBytes;
    if (c.bytes > 0) {
      if (e.reduce) {
        const std::size_t count = c.bytes / size_of(e.call.dtype);
        reduce_into({e.into.data() + e.got, count, e.call.dtype}, {data, count, e.call.dtype},
                    e.call.op);
      } else {
        std::memcpy(e.into.data() + e.got, data, c.bytes);
      }
    }
    e.got += c.bytes;
    p.held_head = (p.held_head + 1) % kMaxSlots;
    --p.held_count;
    ++p.ring_freed[1];
    if (e.got == e.into.size()) e.active = false;
  }
}

void Engine::on_send_done(Peer& p, const ibv_wc& wc, std::uint32_t kind, std::uint32_t index) {
  if (p.sq_outstanding > 0) --p.sq_outstanding;
  std::size_t bytes = 0;
  if (kind == static_cast<std::uint32_t>(WorkKind::send)) {
    if (index < kSendBuffers) {
      bytes = p.send_length[index];
      p.free_send.push_back(index);
    }
  } else {
    const std::uint32_t stream = index >> 16, slot = index & 0xffff;
    if (stream < kStreams && slot < kMaxSlots) p.staging_busy[stream][slot] = false;
    bytes = kSlotBytes;
  }
  if (wc.status != IBV_WC_SUCCESS) completion_failed(p, kind, wc, bytes);
}

void Engine::apply_credits(Peer& p, const Credits& credits) {
  p.recv_credit = std::max(p.recv_credit, credits.recv);
  for (std::size_t s = 0; s < kStreams; ++s) {
    p.ring_credit[s] = std::max(p.ring_credit[s], credits.ring[s]);
  }
}

Credits Engine::take_credits(Peer& p) {
  Credits c{p.recv_reposted, p.ring_freed};
  p.recv_reported = p.recv_reposted;
  p.ring_reported = p.ring_freed;
  return c;
}

void Engine::flush_credits() {
  for (auto& owned : peers_) {
    Peer& p = *owned;
    if (!p.ready || p.closed) continue;
    const bool owe_ring =
        p.ring_freed[0] != p.ring_reported[0] || p.ring_freed[1] != p.ring_reported[1];
    if (!owe_ring && p.recv_reposted - p.recv_reported < kRecvCreditBatch) continue;
    if (can_post_eager(p, true)) post_eager(p, PacketType::credit, {}, {}, true);
  }
}

// ---------------------------------------------------------------- sending --

bool Engine::can_post_eager(const Peer& p, bool control) const {
  if (p.free_send.empty() || p.sq_outstanding >= p.shape.send_depth) return false;
  return control || p.send_credits() > 0;
}

bool Engine::can_post_chunk(const Peer& p, Stream stream) const {
  const auto s = static_cast<std::size_t>(stream);
  return p.send_credits() > 0 && p.ring_credits(stream) > 0 && !p.staging_busy[s][p.ring_next[s]] &&
         p.sq_outstanding < p.shape.send_depth;
}

bool Engine::post_eager(Peer& p, PacketType type, const wire::FrameHeader& frame,
                        std::span<const std::byte> payload, bool control) {
  const std::uint32_t index = p.free_send.back();
  std::byte* buffer = p.send_buffer(index);
  PacketHeader h{type, Stream::p2p, frame, 0, take_credits(p)};
  h.frame.length = payload.size();
  encode_packet(h, std::span<std::byte, kPacketHeaderBytes>(buffer, kPacketHeaderBytes));
  if (!payload.empty()) std::memcpy(buffer + kPacketHeaderBytes, payload.data(), payload.size());
  const auto total = static_cast<std::uint32_t>(kPacketHeaderBytes + payload.size());
  const int rc =
      post_send(p.qp, encode_work_id({WorkKind::send, static_cast<std::uint32_t>(p.rank), index}),
                buffer, total, local_->lkey(), total <= p.shape.max_inline);
  if (rc != 0) {
    if (!control) {
      fail(CollectiveError(ErrorKind::peer_lost, site("SEND", p.rank, format_bytes(total)),
                           std::string("ibv_post_send failed: ") + std::strerror(rc)),
           true);
    }
    return false;
  }
  p.free_send.pop_back();
  p.send_length[index] = total;
  ++p.sq_outstanding;
  if (!control) ++p.data_posted;
  return true;
}

void Engine::post_chunk(Peer& p, Stream stream, const wire::FrameHeader& frame,
                        std::uint64_t offset, std::span<const std::byte> payload) {
  const auto s = static_cast<std::size_t>(stream);
  const std::uint32_t slot = p.ring_next[s];
  std::byte* staging = p.staging_slot(stream, slot);
  const PacketHeader h{PacketType::frame, stream, frame, offset, take_credits(p)};
  encode_packet(h, std::span<std::byte, kPacketHeaderBytes>(staging, kPacketHeaderBytes));
  if (!payload.empty()) std::memcpy(staging + kPacketHeaderBytes, payload.data(), payload.size());
  const auto total = static_cast<std::uint32_t>(kPacketHeaderBytes + payload.size());
  const std::uint32_t imm = (static_cast<std::uint32_t>(s) << 16) | slot;
  const int rc = post_write_with_imm(
      p.qp, encode_work_id({WorkKind::write, static_cast<std::uint32_t>(p.rank), imm}), staging,
      total, local_->lkey(), p.remote.address + slot_index(stream, slot) * kSlotBytes,
      p.remote.rkey, imm, total <= p.shape.max_inline);
  if (rc != 0) {
    fail_and_throw(CollectiveError(ErrorKind::peer_lost,
                                   site("RDMA WRITE_WITH_IMM", p.rank, format_bytes(total)),
                                   std::string("ibv_post_send failed: ") + std::strerror(rc)),
                   true);
  }
  p.staging_busy[s][slot] = true;
  p.ring_next[s] = (slot + 1) % kSlots[s];
  ++p.ring_posted[s];
  ++p.data_posted;
  ++p.sq_outstanding;
}

void Engine::send_message(int to, Tag tag, std::span<const std::byte> payload) {
  Caller caller(*this);
  latch_.rethrow_if_tripped();
  Peer& p = peer(to, "send_bytes");
  // Built only for an error: formatting costs more than a small send.
  auto sizes = [&] { return "tag " + std::to_string(tag) + ", " + format_bytes(payload.size()); };
  const Deadline deadline = coarse_now() + spec_.timeout;
  auto timed_out = [&](const std::string& what) {
    fail_and_throw(
        CollectiveError(ErrorKind::timeout, site("send_bytes", to, sizes()),
                        what + " within " + std::to_string(spec_.timeout.count()) + " ms",
                        "rank " + std::to_string(to) +
                            " stopped taking messages (RLX_TIMEOUT_S sets the deadline)"),
        true);
  };
  if (!drive(caller, deadline, true, [&] { return !p.p2p_sending; })) {
    timed_out("another send to this rank did not finish");
  }
  p.p2p_sending = true;
  struct Release {
    bool& flag;
    ~Release() { flag = false; }
  } release{p.p2p_sending};
  const wire::FrameHeader frame{.kind = wire::FrameKind::message,
                                .tag = tag,
                                .sequence = p.p2p_send_sequence++,
                                .length = payload.size()};
  if (payload.size() <= kEagerPayload) {
    if (!drive(caller, deadline, true, [&] { return can_post_eager(p, false); })) {
      timed_out("no receive buffer of rank " + std::to_string(to) + " came free");
    }
    post_eager(p, PacketType::frame, frame, payload, false);
    latch_.rethrow_if_tripped();
    return;
  }
  std::size_t offset = 0;
  const bool done = drive(caller, deadline, true, [&] {
    while (offset < payload.size() && can_post_chunk(p, Stream::p2p)) {
      const std::size_t n = std::min(kChunkPayload, payload.size() - offset);
      post_chunk(p, Stream::p2p, frame, offset, payload.subspan(offset, n));
      offset += n;
    }
    if (p.closed) {
      fail(CollectiveError(ErrorKind::peer_lost, site("send_bytes", to, sizes()),
                           "rank " + std::to_string(to) + " has shut down its transport"),
           false);
    }
    return offset == payload.size();
  });
  if (!done) {
    timed_out("only " + format_bytes(offset) + " of " + format_bytes(payload.size()) +
              " were taken");
  }
}

void Engine::deliver_to_self(Tag tag, std::span<const std::byte> payload) {
  std::lock_guard lock(mutex_);
  ++mailbox_events_;
  if (!mailbox_.deliver(spec_.rank, tag, {payload.begin(), payload.end()})) {
    throw CollectiveError(ErrorKind::resource_exhausted,
                          site("send_bytes", spec_.rank, format_bytes(payload.size())),
                          "messages to self not yet received exceed RLX_UNEXPECTED_BYTES");
  }
  progressed_.notify_all();
}

std::vector<std::byte> Engine::receive_message(int from, Tag tag) {
  Caller caller(*this);
  // No latch check: messages that arrived before a failure are still
  // delivered; the mailbox throws the failure once they are taken.
  if (auto queued = mailbox_.try_take(from, tag)) return std::move(*queued);
  // Nothing queued: the next such message is this caller's, and skips the
  // mailbox (one receiver per peer at a time; others take the mailbox's
  // way). The mailbox is only searched again when it changed.
  Peer::Waiter waiter{tag, std::nullopt};
  Peer& p = *peers_[static_cast<std::size_t>(from)];
  if (p.waiter == nullptr) p.waiter = &waiter;
  struct Unregister {
    Peer& peer;
    Peer::Waiter* mine;
    ~Unregister() {
      if (peer.waiter == mine) peer.waiter = nullptr;
    }
  } unregister{p, &waiter};
  std::optional<std::vector<std::byte>> message;
  std::uint64_t seen = mailbox_events_;
  const bool got = drive(caller, coarse_now() + spec_.timeout, false, [&] {
    if (waiter.message) {
      message = std::move(waiter.message);
      return true;
    }
    if (seen == mailbox_events_) return false;
    seen = mailbox_events_;
    message = mailbox_.try_take(from, tag);
    return message.has_value();
  });
  if (got) return std::move(*message);
  throw CollectiveError(
      ErrorKind::timeout, site("recv_bytes", from, "tag " + std::to_string(tag)),
      "no message arrived within " + std::to_string(spec_.timeout.count()) + " ms",
      "does rank " + std::to_string(from) + " send with this tag?");
}

// ------------------------------------------------------------ collectives --

void Engine::progress_sends() {
  for (auto& s : sends_) {
    Peer& p = *s.peer;
    while ((!s.started || s.offset < s.payload.size()) && can_post_chunk(p, Stream::collective)) {
      const std::size_t n = std::min(kChunkPayload, s.payload.size() - s.offset);
      post_chunk(p, Stream::collective, s.frame, s.offset, s.payload.subspan(s.offset, n));
      s.offset += n;
      s.started = true;
    }
  }
}

std::string Engine::pending_description() const {
  std::string pending;
  for (const auto& owned : peers_) {
    const auto& e = owned->expect;
    if (e.active) {
      pending += (pending.empty() ? "" : "; ") + std::string("waiting for rank ") +
                 std::to_string(owned->rank) + " (" + format_bytes(e.got) + " of " +
                 format_bytes(e.into.size()) + " received)";
    }
  }
  for (const auto& s : sends_) {
    if (!s.started || s.offset < s.payload.size()) {
      pending += (pending.empty() ? "" : "; ") + std::string("sending to rank ") +
                 std::to_string(s.peer->rank) + " (" + format_bytes(s.offset) + " of " +
                 format_bytes(s.payload.size()) + " sent)";
    }
  }
  return pending;
}

void Engine::exchange(const CollectiveCall& call, std::uint32_t step,
                      std::span<const StepSend> sends, std::span<const StepRecv> recvs) {
  Caller caller(*this);
  latch_.rethrow_if_tripped();
  // Errors name the call; describing it costs more than a small step, so
  // only a failing step does.
  auto link = [&](int rank, int lane) -> Peer& {
    if (rank == spec_.rank || rank < 0 || rank >= spec_.world_size || lane != 0) {
      throw CollectiveError(ErrorKind::invalid_argument, site(call.describe(), rank),
                            "the algorithm asked for a link that does not exist");
    }
    Peer& p = *peers_[static_cast<std::size_t>(rank)];
    if (!p.ready || p.closed) peer(rank, call.describe());  // throws the reason
    return p;
  };
  sends_.clear();
  for (const auto& s : sends) {
    sends_.push_back({&link(s.peer, s.lane), wire::collective_header(call, step, s.bytes.size()),
                      s.bytes, 0, false});
  }
  for (const auto& r : recvs) {
    Peer& p = link(r.peer, r.lane);
    p.expect = {true, false, call, step, r.into, r.reduce, 0};
    consume_held(p);
  }
  flush_credits();
  const bool done = drive(caller, coarse_now() + spec_.timeout, true, [&] {
    progress_sends();
    bool complete = true;
    for (const auto& s : sends_) complete = complete && s.started && s.offset == s.payload.size();
    for (const auto& r : recvs) {
      const Peer& p = *peers_[static_cast<std::size_t>(r.peer)];
      if (!p.expect.active) continue;
      complete = false;
      if (p.closed) {
        fail(CollectiveError(ErrorKind::peer_lost, site(call.describe(), r.peer),
                             "rank " + std::to_string(r.peer) +
                                 " shut down its transport during step " + std::to_string(step)),
             true);
      }
    }
    return complete;
  });
  if (!done) {
    fail_and_throw(
        CollectiveError(ErrorKind::timeout, site(call.describe()),
                        "step " + std::to_string(step) + " did not complete within " +
                            std::to_string(spec_.timeout.count()) + " ms: " + pending_description(),
                        "a rank that never reached this collective, or a network that stopped "
                        "delivering (RLX_TIMEOUT_S sets the deadline)"),
        true);
  }
}

// --------------------------------------------------------------- failures --

void Engine::fail(const CollectiveError& error, bool tell_peers) {
  const auto pointer = std::make_exception_ptr(error);
  if (!latch_.trip(pointer)) return;
  mailbox_.fail(-1, pointer);
  ++mailbox_events_;
  progressed_.notify_all();
  if (!tell_peers) return;
  const std::string text = error.what();
  const auto bytes = std::as_bytes(std::span(text.data(), std::min(text.size(), kEagerPayload)));
  for (auto& owned : peers_) {
    Peer& p = *owned;
    if (!p.ready || p.closed || !can_post_eager(p, true)) continue;
    post_eager(p, PacketType::frame,
               {.kind = wire::FrameKind::abort, .tag = static_cast<std::uint32_t>(error.kind())},
               bytes, true);
  }
}

void Engine::fail_and_throw(const CollectiveError& error, bool tell_peers) {
  fail(error, tell_peers);
  latch_.rethrow_if_tripped();
  throw error;
}

void Engine::close() {
  Caller caller(*this);
  closing_ = true;
  for (auto& owned : peers_) {
    Peer& p = *owned;
    if (p.ready && !p.closed && can_post_eager(p, true)) {
      post_eager(p, PacketType::frame, {.kind = wire::FrameKind::close}, {}, true);
    }
  }
  // Wait briefly for the peers' own close, so none of them mistakes our
  // disconnect for a crash while it still finishes its last receives.
  try {
    drive(caller, coarse_now() + std::min<Clock::duration>(kLinger, spec_.timeout), false, [&] {
      if (latch_.tripped()) return true;
      for (const auto& owned : peers_) {
        if (owned->ready && !owned->closed) return false;
      }
      return true;
    });
  } catch (const CollectiveError&) {
    // Shutting down anyway.
  }
}

}  // namespace rlx::verbs
