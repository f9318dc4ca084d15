// The data path of the verbs transport: credits, eager buffers, rings and the
// completion queue, for every peer.
//
// Per peer there is one RC queue pair carrying two independent streams
// (point-to-point messages and collective steps):
//  * small messages go eager: one SEND of header and payload into a receive
//    buffer the peer pre-posted (inline when the device allows);
//  * large messages and every collective step go as RDMA WRITE_WITH_IMM
//    chunks into the peer's registered ring, each chunk with its own header;
//    the immediate names the stream and slot.
// Credits (cumulative counts carried by every header, or by a credit-only
// SEND) say how many receive buffers and ring slots the reader has freed, so
// a writer never overruns either. All memory is allocated and registered once.
//
// Threads: one mutex guards everything here. Callers drive progress
// themselves while they wait (a bounded spin polling the CQ, yielding the core
// only when ranks share cores), then sleep on a condition variable; the
// progress thread stays out of their way while they are inside the engine,
// and keeps completions, rdma_cm events and early messages moving when
// nobody is, blocking on the completion channel with a timeout when idle.
// A receiver waiting for a message gets it handed over, not queued in the
// mailbox. Every wait has a deadline.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rlx/backends/verbs/connection_manager.h"
#include "rlx/backends/verbs/device.h"
#include "rlx/backends/verbs/packet.h"
#include "rlx/collectives/links.h"
#include "rlx/transport/bounded_spin.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/failure_relay.h"
#include "rlx/transport/mailbox.h"
#include "rlx/transport/socket_io.h"

struct ibv_wc;

namespace rlx::verbs {

class Engine {
 public:
  struct Spec {
    int rank = 0;
    int world_size = 1;
    std::chrono::milliseconds timeout{0};
    // How long a waiting caller polls the CQ before it sleeps
    // (RLX_VERBS_SPIN_US), and whether it yields its core on every empty
    // poll: only when ranks share cores (bounded_spin_for). With a core of
    // its own, a yield is a system call between two polls, which under
    // emulation costs more than a small message's whole round trip.
    BoundedSpin caller_spin{.bound = std::chrono::microseconds(200), .yield = true};
  };

  // Allocates and registers every buffer for every peer. Throws CollectiveError.
  Engine(Spec spec, Device& device, Mailbox& mailbox, FailureLatch& latch);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The queue pair shape the engine needs, and the CQ size for `world_size` ranks.
  static QueueShape queue_shape();
  static int cq_entries(int world_size);

  // ConnectionManager hooks (called with the engine's lock held, see run_locked).
  RingInfo local_ring(int peer) const;
  void post_receives(int peer, ibv_qp* qp);
  void on_ready(const PeerLink& link);
  void on_lost(int peer, const std::string& why);
  void set_handshake_handler(std::function<void(const ibv_wc&)> handler);

  // Runs `fn` under the lock, then polls the CQ once: the setup loop's step.
  void run_locked(const std::function<void()>& fn);
  // Starts the progress thread; `cm_events` handles rdma_cm events on `cm_fd`.
  void start(int cm_fd, std::function<void()> cm_events);
  void stop();

  void send_message(int to, Tag tag, std::span<const std::byte> payload);
  std::vector<std::byte> receive_message(int from, Tag tag);
  // A message to this rank itself, through the same mailbox.
  void deliver_to_self(Tag tag, std::span<const std::byte> payload);
  void exchange(const CollectiveCall& call, std::uint32_t step, std::span<const StepSend> sends,
                std::span<const StepRecv> recvs);
  // Tells every peer this rank is leaving and waits briefly for theirs.
  void close();
  // A failure found outside the engine (the same-host path): recorded as the
  // transport's first, and sent to every peer.
  void report_failure(const CollectiveError& error);

 private:
  struct Peer;
  struct Held;
  struct SendState {
    Peer* peer;
    wire::FrameHeader frame;
    std::span<const std::byte> payload;
    std::size_t offset;
    bool started;
  };

  class Caller;
  // Polls the CQ until `done()` (true), the deadline (false) or a failure
  // (throws, when `check_latch`): a bounded spin, then naps on progressed_.
  template <class Done>
  bool drive(Caller& caller, Deadline deadline, bool check_latch, Done done);
  bool poll_completions();
  // Runs the rdma_cm handler if the progress thread saw events (lock held).
  void handle_cm_events();
  void dispatch(const ibv_wc& wc);
  void on_recv(Peer& p, const ibv_wc& wc, std::uint32_t index);
  void on_eager(Peer& p, const ibv_wc& wc, std::uint32_t index);
  void on_chunk(Peer& p, std::uint32_t imm, std::uint32_t bytes);
  void on_p2p_chunk(Peer& p, const PacketHeader& h, const std::byte* data, std::size_t bytes);
  void consume_held(Peer& p);
  // A chunk held from `p` that no step of this rank waits for: the start of
  // a frame of the current call's number but another call is a mismatch
  // found now, which the step's own peers may never show. Lock held.
  std::optional<CollectiveError> unawaited_mismatch(const Peer& p) const;
  void on_send_done(Peer& p, const ibv_wc& wc, std::uint32_t kind, std::uint32_t index);
  void completion_failed(Peer& p, std::uint32_t kind, const ibv_wc& wc, std::size_t bytes);
  // Into the waiting receiver or the mailbox; `awaited` messages (a receiver
  // waited when they began) are not held against the cap.
  void deliver(Peer& p, Tag tag, std::vector<std::byte> message, bool awaited = false);
  void apply_credits(Peer& p, const Credits& credits);
  void repost(Peer& p, std::uint32_t index);
  void flush_credits();

  bool can_post_eager(const Peer& p, bool control) const;
  bool can_post_chunk(const Peer& p, Stream stream) const;
  bool post_eager(Peer& p, PacketType type, const wire::FrameHeader& frame,
                  std::span<const std::byte> payload, bool control);
  void post_chunk(Peer& p, Stream stream, const wire::FrameHeader& frame, std::uint64_t offset,
                  std::span<const std::byte> payload);
  Credits take_credits(Peer& p);
  void progress_sends();

  Peer& peer(int rank, std::string_view operation);
  ErrorSite site(std::string_view operation, int peer = -1, std::string sizes = {}) const;
  // Records the transport's first fatal error; `tell_peers` sends it to every
  // other rank (an abort). A failure heard from a peer is told to the others
  // only at close (FailureRelay). Lock held.
  void fail(const CollectiveError& error, bool tell_peers);
  // FailureRelay's way out: one eager frame to every connected peer. Lock held.
  void post_to_peers(const wire::FrameHeader& header, std::span<const std::byte> payload);
  void violation(Peer& p, const std::string& what);
  [[noreturn]] void fail_and_throw(const CollectiveError& error, bool tell_peers);
  std::string pending_description() const;
  void run();

  Spec spec_;
  std::chrono::microseconds caller_spin_;
  Device& device_;
  Mailbox& mailbox_;
  FailureLatch& latch_;
  FailureRelay relay_{spec_.rank, latch_, mailbox_,
                      [this](const wire::FrameHeader& header, std::span<const std::byte> payload) {
                        post_to_peers(header, payload);
                      }};
  std::unique_ptr<RegisteredMemory> local_;  // receive, send and staging buffers
  std::unique_ptr<RegisteredMemory> ring_;   // remote-writable ring slots
  std::vector<std::unique_ptr<Peer>> peers_;
  std::function<void(const ibv_wc&)> handshake_;

  std::mutex mutex_;
  std::condition_variable progressed_;
  std::vector<SendState> sends_;                // the current collective step's, reused
  std::optional<CollectiveCall> current_call_;  // the last that exchange() ran
  bool closing_ = false;
  std::uint64_t mailbox_events_ = 0;  // deliveries and failures, for receivers

  std::thread thread_;
  std::atomic<bool> stopping_{false};
  // Callers inside the engine and awake (see Caller): the progress thread
  // stands aside meanwhile (a second poller only bounces the mutex and
  // competes for the cores the device's own work needs), and is kicked
  // (stop_fd_) when the last one goes to sleep.
  std::atomic<int> callers_{0};
  // rdma_cm has events or its timers are due: the next lock holder runs the
  // handler (set by the progress thread, see run()).
  std::atomic<bool> cm_pending_{false};
  int stop_fd_ = -1;
  int cm_fd_ = -1;
  std::function<void()> cm_events_;
};

}  // namespace rlx::verbs
