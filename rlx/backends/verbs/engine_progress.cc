#include <array>

#include <poll.h>
#include <unistd.h>

#include "rlx/backends/verbs/engine_internal.h"

namespace rlx::verbs {

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

}  // namespace rlx::verbs
