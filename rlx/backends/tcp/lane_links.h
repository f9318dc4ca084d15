// Links over the TCP lanes: how the algorithms of rlx/collectives/ run on TCP.
//
// exchange() is driven by the calling thread: non-blocking sockets retried
// for a short spin, then a poll() over every socket of the step plus the
// failure latch's eventfd, bounded by the operation's deadline. Sends stream header and
// payload without copies; receives either land straight in the destination
// or, when reducing, pass through a per-connection staging buffer that is
// reduced into the destination as each piece arrives. All buffers are
// allocated (and touched) once, at construction.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include <poll.h>

#include "rlx/collectives/links.h"
#include "rlx/transport/bounded_spin.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/frame.h"
#include "rlx/transport/socket_io.h"

namespace rlx::tcp {

class LaneLinks final : public Links {
 public:
  // lanes[peer][lane]: this rank's lane connections (empty for itself).
  // `on_failure` is called with every error exchange() throws, before it
  // throws, so the transport can tell the other ranks. A step that cannot
  // move retries for the `spin` before it blocks in poll().
  LaneLinks(int rank, int world_size, std::vector<std::vector<UniqueFd>> lanes,
            std::chrono::milliseconds timeout, BoundedSpin spin, FailureLatch& latch,
            std::function<void(const CollectiveError&)> on_failure);

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int lanes() const override { return num_lanes_; }
  void exchange(const CollectiveCall& call, std::uint32_t step, std::span<const StepSend> sends,
                std::span<const StepRecv> recvs) override;
  std::span<std::byte> scratch(std::size_t bytes) override;

  // Half-closes every lane (used at shutdown).
  void shutdown_send();

  // Called when a step times out, before the error is built: returns what it
  // found out about the ranks that stopped answering (appended to the
  // error), so every survivor names the rank that is stuck, not only the
  // neighbour it waited for. It may take a moment (a round trip to each peer).
  void set_silence_probe(std::function<std::string()> probe) { silence_probe_ = std::move(probe); }

 private:
  struct SendState {
    int fd;
    int peer;
    wire::EncodedHeader header;
    std::span<const std::byte> payload;
    std::size_t sent;  // header and payload bytes written so far
  };
  struct RecvState {
    int fd;
    int peer;
    std::span<std::byte> into;
    bool reduce;
    std::span<std::byte> staging;
    wire::EncodedHeader header;
    std::size_t header_got;
    std::size_t got;    // payload bytes consumed into `into`
    std::size_t carry;  // bytes of a partial element waiting in staging
  };

  // This rank in `call`, with `peer`: a failure met here names the call.
  ErrorSite site_of(const CollectiveCall& call, int peer = -1) const;
  void run(const CollectiveCall& call, std::uint32_t step);
  bool progress_send(SendState& s);
  bool progress_recv(RecvState& r, const CollectiveCall& call, std::uint32_t step);
  void check_header(const RecvState& r, const CollectiveCall& call, std::uint32_t step);
  // Where the next payload bytes of `r` land (the destination, or staging when
  // reducing), at most `budget` of them, and what to do once `n` have.
  static std::span<std::byte> payload_room(const RecvState& r, std::size_t budget);
  static void take_payload(RecvState& r, std::size_t n, const CollectiveCall& call);
  static void absorb(RecvState& r, std::size_t n, const CollectiveCall& call);
  void wait_for_sockets(const CollectiveCall& call, std::uint32_t step, Deadline deadline);
  // Once a step has waited a while, the frames other peers already sent to
  // this rank: one of this call's number but another call is a mismatch
  // found now, which the step's own frames may never show (a rank in a small
  // all_reduce waits for a peer that, in its broadcast, sends it nothing).
  // Appends the sockets worth a look to pollfds_ (their lanes to watched_)
  // and looks at those poll() found ready.
  void watch_other_sockets(const CollectiveCall& call);
  void look_at_watched(const CollectiveCall& call, std::size_t first_watched);
  void look_at_unread_frame(const CollectiveCall& call, int peer, int lane);
  // On a frame of a later call: throws the mismatch a frame of this call's
  // number names, if one is unread on a lane outside the step or arrives
  // there within a short wait; else returns.
  void raise_other_call_if_found(const CollectiveCall& call);
  // The mismatch the header of the unread frame first on `peer`'s `lane`
  // shows (a frame of another call with this call's number), if any.
  std::optional<CollectiveError> unread_frame_mismatch(const CollectiveCall& call, int peer,
                                                       int lane) const;
  // Tells the transport (on_failure) and throws.
  [[noreturn]] void raise(const CollectiveError& error);
  [[noreturn]] void fail_timeout(const CollectiveCall& call, std::uint32_t step);
  [[noreturn]] void fail(ErrorKind kind, const CollectiveCall& call, int peer,
                         const std::string& detail, const std::string& hint = {});
  int lane_fd(int peer, int lane, const CollectiveCall& call) const;
  std::size_t lane_index(int peer, int lane) const {
    return static_cast<std::size_t>(peer * num_lanes_ + lane);
  }
  std::span<std::byte> staging_for(int peer, int lane);

  int rank_, world_size_, num_lanes_;
  std::vector<std::vector<UniqueFd>> lanes_;
  std::chrono::milliseconds timeout_;
  BoundedSpin spin_;
  FailureLatch& latch_;
  std::function<void(const CollectiveError&)> on_failure_;
  std::function<std::string()> silence_probe_;
  std::vector<std::byte> staging_;  // one slice per (peer, lane)
  std::vector<std::byte> scratch_;
  std::vector<SendState> sends_;  // reused between steps: no allocation once warm
  std::vector<RecvState> recvs_;
  std::vector<pollfd> pollfds_;
  // Per (peer, lane): nothing more to learn from its next frame in
  // watched_call_ (it is this call's, the peer is ahead, or it is gone).
  CollectiveCall watched_call_;
  std::vector<char> settled_;
  std::vector<std::pair<int, int>> watched_;  // (peer, lane) of the polled, in order
};

}  // namespace rlx::tcp
