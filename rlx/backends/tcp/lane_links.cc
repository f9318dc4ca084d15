#include "rlx/backends/tcp/lane_links.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "rlx/collectives/reduce.h"
#include "rlx/transport/frame_mismatch.h"
#include "rlx/transport/wire.h"

namespace rlx::tcp {
namespace {

// Per-connection staging for reducing receives: large enough that one recv()
// moves a good piece of a chunk, small enough to stay in cache while reduced.
constexpr std::size_t kStagingBytes = 256 * 1024;

// Bytes moved per socket call: small enough that one rank's thread alternates
// between its sends and its receives (keeping both directions of every lane
// streaming, and received data still in cache when reduced), large enough to
// keep system calls few.
constexpr std::size_t kMaxBytesPerCall = 512 * 1024;

// How long a lost connection waits for the abort that may explain it.
constexpr std::chrono::milliseconds kRootCauseGrace{250};

// How long a step waits before it also watches the sockets it does not
// read (watch_other_sockets): steps that wait less never poll them, and a
// mismatch found this late still beats the deadline it replaces by far.
constexpr std::chrono::milliseconds kWatchOthersAfter{100};
// How long a rank that met a frame of a later call looks for one of this
// call's number naming the other call, before it reports the later one.
constexpr std::chrono::milliseconds kWaitForTheOtherCall{50};

bool would_block(int code) { return code == EAGAIN || code == EWOULDBLOCK || code == EINTR; }

// A socket polled only for sending whose peer is gone: it polls as ready
// for good, and no send on it completes.
bool sends_to_a_gone_peer(const pollfd& p) {
  return (p.events & POLLIN) == 0 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

}  // namespace

LaneLinks::LaneLinks(int rank, int world_size, std::vector<std::vector<UniqueFd>> lanes,
                     std::chrono::milliseconds timeout, BoundedSpin spin, FailureLatch& latch,
                     std::function<void(const CollectiveError&)> on_failure)
    : rank_(rank),
      world_size_(world_size),
      num_lanes_(0),
      lanes_(std::move(lanes)),
      timeout_(timeout),
      spin_(spin),
      latch_(latch),
      on_failure_(std::move(on_failure)) {
  for (const auto& peer_lanes : lanes_) {
    num_lanes_ = std::max(num_lanes_, static_cast<int>(peer_lanes.size()));
  }
  // Value-initialised, so every page is touched now rather than on the hot path.
  staging_.resize(static_cast<std::size_t>(world_size_ * num_lanes_) * kStagingBytes);
  sends_.reserve(64);
  recvs_.reserve(64);
  pollfds_.reserve(129 + static_cast<std::size_t>(world_size_ * num_lanes_));
  settled_.assign(static_cast<std::size_t>(world_size_ * num_lanes_), 0);
  watched_.reserve(settled_.size());
}

ErrorSite LaneLinks::site_of(const CollectiveCall& call, int peer) const {
  return {.rank = rank_, .world_size = world_size_, .peer = peer, .operation = call.describe()};
}

std::span<std::byte> LaneLinks::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return scratch_;
}

void LaneLinks::shutdown_send() {
  for (const auto& peer_lanes : lanes_) {
    for (const auto& fd : peer_lanes) ::shutdown(fd.get(), SHUT_WR);
  }
}

int LaneLinks::lane_fd(int peer, int lane, const CollectiveCall& call) const {
  if (peer < 0 || peer >= world_size_ || peer == rank_ || lane < 0 ||
      lane >= static_cast<int>(lanes_[static_cast<std::size_t>(peer)].size())) {
    throw CollectiveError(
        ErrorKind::invalid_argument,
        {.rank = rank_, .world_size = world_size_, .peer = peer, .operation = call.describe()},
        "the algorithm asked for lane " + std::to_string(lane) + ", which does not exist");
  }
  return lanes_[static_cast<std::size_t>(peer)][static_cast<std::size_t>(lane)].get();
}

std::span<std::byte> LaneLinks::staging_for(int peer, int lane) {
  return std::span(staging_).subspan(lane_index(peer, lane) * kStagingBytes, kStagingBytes);
}

void LaneLinks::exchange(const CollectiveCall& call, std::uint32_t step,
                         std::span<const StepSend> sends, std::span<const StepRecv> recvs) {
  // No latch check here: a step whose data is on its sockets completes even
  // after a failure elsewhere (wait_for_sockets), so a peer that sent its
  // part and exited at once costs this call nothing. The collective's start
  // checked it (LinksTransport::run).
  sends_.clear();
  recvs_.clear();
  for (const auto& s : sends) {
    sends_.push_back({lane_fd(s.peer, s.lane, call), s.peer,
                      wire::encode(wire::collective_header(call, step, s.bytes.size())), s.bytes,
                      0});
  }
  for (const auto& r : recvs) {
    recvs_.push_back({lane_fd(r.peer, r.lane, call),
                      r.peer,
                      r.into,
                      r.reduce,
                      staging_for(r.peer, r.lane),
                      {},
                      0,
                      0,
                      0});
  }
  run(call, step);
}

void LaneLinks::run(const CollectiveCall& call, std::uint32_t step) {
  const Deadline deadline = Clock::now() + timeout_;
  for (;;) {
    bool done = false;
    const bool moved = spin_.until([&] {
      done = true;
      for (auto& s : sends_) done = progress_send(s) && done;
      for (auto& r : recvs_) done = progress_recv(r, call, step) && done;
      // Checked on every round, not only after poll(): a poll() that finds a
      // byte ready returns before it looks at the clock.
      return done || Clock::now() >= deadline;
    });
    if (done) return;
    if (moved || Clock::now() >= deadline) fail_timeout(call, step);
    wait_for_sockets(call, step, deadline);
  }
}

bool LaneLinks::progress_send(SendState& s) {
  const std::size_t total = wire::kFrameHeaderBytes + s.payload.size();
  while (s.sent < total) {
    iovec iov[2];
    int count = 0;
    if (s.sent < wire::kFrameHeaderBytes) {
      iov[count++] = {s.header.data() + s.sent, wire::kFrameHeaderBytes - s.sent};
    }
    const std::size_t payload_done =
        s.sent > wire::kFrameHeaderBytes ? s.sent - wire::kFrameHeaderBytes : 0;
    if (payload_done < s.payload.size()) {
      iov[count++] = {const_cast<std::byte*>(s.payload.data()) + payload_done,
                      std::min(s.payload.size() - payload_done, kMaxBytesPerCall)};
    }
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t n = ::sendmsg(s.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return false;  // full, or the peer's loss (reported by poll/recv with context)
    s.sent += static_cast<std::size_t>(n);
    if (s.sent < total) return false;  // let the other transfers of the step move too
  }
  return true;
}

bool LaneLinks::progress_recv(RecvState& r, const CollectiveCall& call, std::uint32_t step) {
  auto receive = [&](iovec* iov, int count) -> std::size_t {
    msghdr message{};
    message.msg_iov = iov;
    message.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t n = ::recvmsg(r.fd, &message, MSG_DONTWAIT);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n < 0 && would_block(errno)) return 0;
    fail(ErrorKind::peer_lost, call, r.peer,
         "rank " + std::to_string(r.peer) + " closed the connection during step " +
             std::to_string(step) + (n < 0 ? std::string(" (") + std::strerror(errno) + ")" : ""),
         "rank " + std::to_string(r.peer) + "'s own output says why it stopped");
  };
  // A budget per call, so one busy receive does not starve the step's others.
  std::size_t budget = kMaxBytesPerCall;
  while (r.header_got < wire::kFrameHeaderBytes) {
    // The header with the payload's first bytes: one system call, not two
    // (each costs about 1 us on this VM). Nothing past this frame is asked for.
    const std::span<std::byte> room = payload_room(r, budget);
    iovec iov[2] = {{r.header.data() + r.header_got, wire::kFrameHeaderBytes - r.header_got},
                    {room.data(), room.size()}};
    const std::size_t n = receive(iov, room.empty() ? 1 : 2);
    if (n == 0) return false;
    const std::size_t header_part = std::min(n, wire::kFrameHeaderBytes - r.header_got);
    r.header_got += header_part;
    if (r.header_got == wire::kFrameHeaderBytes) check_header(r, call, step);
    take_payload(r, n - header_part, call);
    budget -= n - header_part;
  }
  while (r.got + r.carry < r.into.size()) {
    if (budget == 0) return false;
    const std::span<std::byte> room = payload_room(r, budget);
    iovec iov{room.data(), room.size()};
    const std::size_t n = receive(&iov, 1);
    if (n == 0) return false;
    take_payload(r, n, call);
    budget -= n;
  }
  return true;
}

std::span<std::byte> LaneLinks::payload_room(const RecvState& r, std::size_t budget) {
  const std::size_t left = std::min(r.into.size() - r.got - r.carry, budget);
  if (!r.reduce) return r.into.subspan(r.got, left);
  return r.staging.subspan(r.carry, std::min(r.staging.size() - r.carry, left));
}

void LaneLinks::take_payload(RecvState& r, std::size_t n, const CollectiveCall& call) {
  if (n == 0) return;
  if (!r.reduce) {
    r.got += n;
    return;
  }
  absorb(r, n, call);
}

void LaneLinks::absorb(RecvState& r, std::size_t n, const CollectiveCall& call) {
  const std::size_t element = size_of(call.dtype);
  const std::size_t available = r.carry + n;
  const std::size_t elements = available / element;
  if (elements > 0) {
    reduce_into({r.into.data() + r.got, elements, call.dtype},
                {r.staging.data(), elements, call.dtype}, call.op);
    r.got += elements * element;
  }
  r.carry = available - elements * element;
  if (r.carry > 0) std::memmove(r.staging.data(), r.staging.data() + elements * element, r.carry);
}

void LaneLinks::check_header(const RecvState& r, const CollectiveCall& call, std::uint32_t step) {
  wire::FrameHeader h;
  try {
    h = wire::decode(r.header);
  } catch (const wire::DecodeError& error) {
    fail(ErrorKind::protocol_violation, call, r.peer, error.what());
  }
  if (h.kind != wire::FrameKind::collective) {
    fail(ErrorKind::protocol_violation, call, r.peer, "a non-collective frame on a lane");
  }
  if (auto mismatch = wire::step_mismatch(site_of(call), call, step, r.into.size(), r.peer, h)) {
    if (h.sequence != call.sequence) raise_other_call_if_found(call);
    raise(*mismatch);
  }
}

void LaneLinks::wait_for_sockets(const CollectiveCall& call, std::uint32_t step,
                                 Deadline deadline) {
  pollfds_.clear();
  auto want = [&](int fd, short events) {
    for (auto& p : pollfds_) {
      if (p.fd == fd) {
        p.events = static_cast<short>(p.events | events);
        return;
      }
    }
    pollfds_.push_back({fd, events, 0});
  };
  for (const auto& s : sends_) {
    if (s.sent < wire::kFrameHeaderBytes + s.payload.size()) want(s.fd, POLLOUT);
  }
  for (const auto& r : recvs_) {
    if (r.header_got < wire::kFrameHeaderBytes || r.got + r.carry < r.into.size())
      want(r.fd, POLLIN);
  }
  const auto step_fds = static_cast<std::ptrdiff_t>(pollfds_.size());
  pollfds_.push_back({latch_.wake_fd(), POLLIN, 0});
  const Deadline watch_from = deadline - timeout_ + kWatchOthersAfter;
  const bool watching = Clock::now() >= watch_from;
  if (watching) watch_other_sockets(call);
  const int n = ::poll(pollfds_.data(), pollfds_.size(),
                       ms_until(watching ? deadline : std::min(deadline, watch_from)));
  if (latch_.tripped()) {
    // Bytes already on a socket of this step go first: run() takes them
    // and comes back here, and the failure is thrown once nothing is ready.
    // A send to a peer that is gone is never ready: run() would come back
    // here until the deadline.
    const bool ready =
        std::any_of(pollfds_.begin(), pollfds_.begin() + step_fds,
                    [](const pollfd& p) { return p.revents != 0 && !sends_to_a_gone_peer(p); });
    if (!ready) latch_.rethrow_if_tripped(site_of(call));
    return;
  }
  if (n > 0 && watching) look_at_watched(call, static_cast<std::size_t>(step_fds) + 1);
  if (n > 0 || (n < 0 && errno == EINTR)) {
    for (const auto& p : std::span(pollfds_).first(static_cast<std::size_t>(step_fds))) {
      if (sends_to_a_gone_peer(p)) {
        // A send whose peer is gone: no receive will report it, so report it here.
        for (const auto& s : sends_) {
          if (s.fd == p.fd) {
            fail(ErrorKind::peer_lost, call, s.peer,
                 "rank " + std::to_string(s.peer) + " closed the connection during step " +
                     std::to_string(step));
          }
        }
      }
    }
    return;
  }
  if (Clock::now() >= deadline) fail_timeout(call, step);
}

void LaneLinks::watch_other_sockets(const CollectiveCall& call) {
  if (!(call == watched_call_)) {
    watched_call_ = call;
    std::fill(settled_.begin(), settled_.end(), 0);
  }
  watched_.clear();
  for (int peer = 0; peer < world_size_; ++peer) {
    const auto& peer_lanes = lanes_[static_cast<std::size_t>(peer)];
    for (int lane = 0; lane < static_cast<int>(peer_lanes.size()); ++lane) {
      const int fd = peer_lanes[static_cast<std::size_t>(lane)].get();
      const bool in_step = std::any_of(recvs_.begin(), recvs_.end(),
                                       [fd](const RecvState& r) { return r.fd == fd; });
      if (in_step || settled_[lane_index(peer, lane)] != 0) continue;
      pollfds_.push_back({fd, POLLIN, 0});
      watched_.push_back({peer, lane});
    }
  }
}

void LaneLinks::look_at_watched(const CollectiveCall& call, std::size_t first_watched) {
  for (std::size_t i = 0; i < watched_.size(); ++i) {
    const short revents = pollfds_[first_watched + i].revents;
    const auto [peer, lane] = watched_[i];
    // A reset connection: a peek would take its error from the step that
    // reads it, which names it.
    if ((revents & POLLERR) != 0) {
      settled_[lane_index(peer, lane)] = 1;
    } else if (revents != 0) {
      look_at_unread_frame(call, peer, lane);
    }
  }
}

void LaneLinks::look_at_unread_frame(const CollectiveCall& call, int peer, int lane) {
  // Whatever is found, this socket is not looked at again in this call: its
  // frame belongs to a later step, or a step reading it reports what is wrong
  // with it (a loss, a bad header), or it is the mismatch thrown here. So is
  // a header not yet whole (rare: a frame starts a send), since waiting for
  // its rest would spin.
  settled_[lane_index(peer, lane)] = 1;
  if (auto mismatch = unread_frame_mismatch(call, peer, lane)) raise(*mismatch);
}

void LaneLinks::raise_other_call_if_found(const CollectiveCall& call) {
  // A frame of a later call: its sender finished this call's number as
  // another call, or as this one while another rank called something else.
  // A frame of this number that names the other call may be on its way (a
  // rooted call's check frame, root_check.cc, sent as its rank's call
  // started): it says what went wrong, so it is worth a short wait.
  const auto until = Clock::now() + kWaitForTheOtherCall;
  for (;;) {
    for (int peer = 0; peer < world_size_; ++peer) {
      const auto& peer_lanes = lanes_[static_cast<std::size_t>(peer)];
      for (int lane = 0; lane < static_cast<int>(peer_lanes.size()); ++lane) {
        const int fd = peer_lanes[static_cast<std::size_t>(lane)].get();
        // The step's own sockets may be mid-frame: their next bytes are no header.
        if (std::any_of(recvs_.begin(), recvs_.end(),
                        [fd](const RecvState& r) { return r.fd == fd; })) {
          continue;
        }
        if (auto other = unread_frame_mismatch(call, peer, lane)) raise(*other);
      }
    }
    if (Clock::now() >= until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // an error path, once
  }
}

std::optional<CollectiveError> LaneLinks::unread_frame_mismatch(const CollectiveCall& call,
                                                                int peer, int lane) const {
  std::array<std::byte, wire::kFrameHeaderBytes> bytes;
  const int fd = lanes_[static_cast<std::size_t>(peer)][static_cast<std::size_t>(lane)].get();
  if (::recv(fd, bytes.data(), bytes.size(), MSG_PEEK | MSG_DONTWAIT) !=
      static_cast<ssize_t>(bytes.size())) {
    return std::nullopt;
  }
  wire::FrameHeader header;
  try {
    header = wire::decode(bytes);
  } catch (const wire::DecodeError&) {
    return std::nullopt;
  }
  if (header.kind != wire::FrameKind::collective) return std::nullopt;
  return wire::other_call(site_of(call), call, peer, header);
}

void LaneLinks::fail_timeout(const CollectiveCall& call, std::uint32_t step) {
  std::string pending;
  for (const auto& r : recvs_) {
    if (r.got + r.carry < r.into.size() || r.header_got < wire::kFrameHeaderBytes) {
      pending += (pending.empty() ? "" : "; ") + std::string("waiting for rank ") +
                 std::to_string(r.peer) + " (" + format_bytes(r.got + r.carry) + " of " +
                 format_bytes(r.into.size()) + " received)";
    }
  }
  for (const auto& s : sends_) {
    if (s.sent < wire::kFrameHeaderBytes + s.payload.size()) {
      pending +=
          (pending.empty() ? "" : "; ") + std::string("sending to rank ") + std::to_string(s.peer);
    }
  }
  const std::string silence = silence_probe_ ? silence_probe_() : "";
  // Another rank may have found the cause meanwhile: its report wins.
  latch_.rethrow_if_tripped(site_of(call));
  fail(ErrorKind::timeout, call, -1,
       "step " + std::to_string(step) + " did not complete within " +
           std::to_string(timeout_.count()) + " ms: " + pending + silence,
       "a rank that never reached this collective, or a network that stopped delivering "
       "(RLX_TIMEOUT_S sets the deadline)");
}

void LaneLinks::fail(ErrorKind kind, const CollectiveCall& call, int peer,
                     const std::string& detail, const std::string& hint) {
  if (kind == ErrorKind::peer_lost) {
    // A peer that closes mid-collective has usually failed for a reason it
    // sent to everyone (an abort on the point-to-point connection). Give the
    // progress thread a moment to deliver it: the root cause beats the symptom.
    pollfd wake{latch_.wake_fd(), POLLIN, 0};
    ::poll(&wake, 1, static_cast<int>(kRootCauseGrace.count()));
    latch_.rethrow_if_tripped(site_of(call));
  }
  raise(CollectiveError(kind, site_of(call, peer), detail, hint));
}

void LaneLinks::raise(const CollectiveError& error) {
  if (on_failure_) on_failure_(error);
  throw error;
}

}  // namespace rlx::tcp
