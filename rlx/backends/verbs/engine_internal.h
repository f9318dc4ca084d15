// The verbs engine's internals, shared by its implementation files (and no
// one else): the buffer layout and its constants, a peer's state, and how a
// caller drives progress while it waits.
//
//   engine.cc                 construction, connection hooks, failures, close
//   engine_progress.cc        the progress thread and the completion queue
//   engine_credits.cc         credits, and posting SENDs and ring chunks
//   engine_receive.cc         eager messages, ring chunks, assembly, held chunks
//   engine_point_to_point.cc  send_message, receive_message
//   engine_exchange.cc        one collective step
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <ctime>
#include <optional>
#include <vector>

#include <infiniband/verbs.h>
#include <unistd.h>

#include "rlx/backends/verbs/engine.h"

namespace rlx::verbs {
namespace engine_detail {

// Eager buffers: a header and up to kEagerPayload bytes of a message.
inline constexpr std::size_t kEagerBytes = 4096;
inline constexpr std::size_t kEagerPayload = kEagerBytes - kPacketHeaderBytes;
static_assert(wire::kMaxAbortTextBytes <= kEagerPayload, "an abort fits one eager packet");
// Receive buffers per peer: kRecvCredits for data (SENDs and ring chunks, both
// consume one), the rest for control messages (credits, abort, close), which
// need no credit. Control messages in flight are bounded by the ring slots
// and credit batches they return (see flush_credits), well below kRecvReserve.
inline constexpr std::uint32_t kRecvCredits = 64;
inline constexpr std::uint32_t kRecvReserve = 32;
inline constexpr std::uint32_t kRecvBuffers = kRecvCredits + kRecvReserve;
inline constexpr std::uint32_t kSendBuffers = kRecvBuffers;
inline constexpr std::uint32_t kSendDepth = 128;
inline constexpr std::uint32_t kRecvDepth = kRecvBuffers + 4;  // + the handshake's receive
// Ring slots: a chunk is a header and kChunkPayload bytes, a multiple of every
// element size, so a reducing receive never sees half an element.
inline constexpr std::size_t kSlotBytes = 256 * 1024;
inline constexpr std::size_t kChunkPayload = kSlotBytes - 128;
inline constexpr std::array<std::uint32_t, kStreams> kSlots = {4, 8};
inline constexpr std::uint32_t kSlotsPerPeer = kSlots[0] + kSlots[1];
inline constexpr std::uint32_t kMaxSlots = 8;
// Return receive credits once this many are owed (ring slots: at once).
inline constexpr std::uint64_t kRecvCreditBatch = kRecvCredits / 4;
// The progress thread polls this many times after its last completion before
// it arms the completion channel and sleeps (counted, not timed: see coarse_now).
inline constexpr std::uint32_t kProgressSpinPolls = 32;
// A sleeper re-checks at least this often, whatever wakes it.
inline constexpr auto kNap = std::chrono::milliseconds(20);
inline constexpr int kIdlePollMs = 100;
// How often a progress thread standing aside checks whether the caller left:
// soon after it took over, less often the longer callers keep driving (each
// look wakes a thread that takes a core from them).
inline constexpr int kStandAsideMinMs = 1;
inline constexpr int kStandAsideMaxMs = 16;
// While it polls, the progress thread also looks at rdma_cm this often.
inline constexpr std::uint32_t kCmEverySteps = 64;
// At shutdown, how long to wait for the peers' own close.
inline constexpr auto kLinger = std::chrono::seconds(2);

inline constexpr std::size_t kLocalPerPeer =
    (kRecvBuffers + kSendBuffers) * kEagerBytes + kSlotsPerPeer * kSlotBytes;
inline constexpr std::size_t kRingPerPeer = kSlotsPerPeer * kSlotBytes;

inline std::uint32_t slot_index(Stream stream, std::uint32_t slot) {
  return (stream == Stream::p2p ? 0 : kSlots[0]) + slot;
}

// CLOCK_MONOTONIC_COARSE (the steady clock's timebase) is always served by
// the vDSO, while a fine clock read may be a system call and a device access
// (HPET under QEMU TCG: tens of microseconds, more than a small message's
// round trip). It is good to a clock tick (1-4 ms): plenty for deadlines, and
// it bounds the spin window to at most a tick beyond RLX_VERBS_SPIN_US.
inline Clock::time_point coarse_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

// How far the coarse clock moves at once (its resolution: a clock tick).
inline Clock::duration coarse_tick() {
  static const Clock::duration tick = [] {
    timespec ts{};
    ::clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
    return std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(ts.tv_sec) +
                                                       std::chrono::nanoseconds(ts.tv_nsec));
  }();
  return tick;
}

inline bool is_peer_failure(ibv_wc_status status) {
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

}  // namespace engine_detail

using namespace engine_detail;  // NOLINT: the engine's own files share these names

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

  // What this rank may still post: counts posted against the peer's
  // cumulative credits (send_credits, ring_credits).
  struct Posting {
    std::uint64_t data_posted = 0;
    std::uint64_t recv_credit = 0;  // the peer's cumulative count
    std::array<std::uint64_t, kStreams> ring_posted{};
    std::array<std::uint64_t, kStreams> ring_credit{};
    std::array<std::uint32_t, kStreams> ring_next{};
  } posting;

  // What this rank owes the peer: receive buffers reposted and ring slots
  // freed, against what it last reported (take_credits).
  struct Owed {
    std::uint64_t recv_reposted = 0, recv_reported = 0;
    std::array<std::uint64_t, kStreams> ring_freed{}, ring_reported{};
    std::array<std::uint32_t, kStreams> ring_expect{};
  } owed;

  // A receiver waiting for this peer's next message with `tag`, with nothing
  // older for it in the mailbox: the message goes straight to it.
  struct Waiter {
    Tag tag = 0;
    std::optional<std::vector<std::byte>> message;
  };
  // Point-to-point: ordering, the large message being assembled, the waiter.
  struct PointToPoint {
    std::uint64_t send_sequence = 0;
    bool sending = false;
    std::uint64_t expected = 0;
    bool assembling = false;
    bool assembly_awaited = false;  // a receiver waited for it when it began: no cap
    wire::FrameHeader assembly_frame;
    std::vector<std::byte> assembly;
    std::size_t assembled = 0;
    Waiter* waiter = nullptr;
  } p2p;

  // Collective chunks that arrived before their step was posted, in order.
  struct HeldChunks {
    std::array<Held, kMaxSlots> chunks{};
    std::uint32_t head = 0, count = 0;
  } held;
  // The collective step this rank expects from the peer, and where it goes.
  struct Expectation {
    bool active = false;
    bool started = false;
    CollectiveCall call;
    std::uint32_t step = 0;
    std::span<std::byte> into;
    bool reduce = false;
    std::size_t got = 0;
  } expect;

  std::uint64_t send_credits() const {
    return posting.recv_credit + remote.recv_credits - posting.data_posted;
  }
  std::uint64_t ring_credits(Stream s) const {
    const auto i = static_cast<std::size_t>(s);
    return posting.ring_credit[i] + remote.slots[i] - posting.ring_posted[i];
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
    if (cm_pending_.load(std::memory_order_relaxed)) handle_cm_events();
    if (done()) return true;
    if (poll_completions()) {
      progressed_.notify_all();
      spin_until = coarse_now() + caller_spin_ + coarse_tick();
      continue;
    }
    // A failure outranks only a wait that data on hand cannot end: a peer
    // that sent its part and exited at once trips the latch while that part
    // still sits in the completion queue.
    if (check_latch) latch_.rethrow_if_tripped();
    const auto now = coarse_now();
    if (now >= deadline) return false;
    if (now <= spin_until) {
      // Another caller of this rank may want the lock; when ranks share
      // cores, so may the device's own work (rxe runs in the kernel).
      caller.lock.unlock();
      if (spec_.caller_spin.yield) std::this_thread::yield();
      caller.lock.lock();
      continue;
    }
    caller.sleep_until(std::min<Deadline>(deadline, Clock::now() + kNap));
  }
}

}  // namespace rlx::verbs
