// send_bytes/recv_bytes between the ranks of one host, through the rings of
// their segments, with transport.h's semantics: send never waits for the
// receiver, FIFO per (peer, tag), deadlines, the failure latch.
//
// A receiver reads its ring itself (no thread hop: a 4-byte message costs a
// few cache-line transfers), taking the message it waits for and parking the
// others in the Mailbox. When nobody reads and a sender finds the ring full,
// the sender wakes this rank's drain thread, which moves whole messages into
// the Mailbox (within RLX_UNEXPECTED_BYTES) so the sender can go on.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rlx/transport/failure_latch.h"
#include "rlx/transport/mailbox.h"
#include "rlx/transport/shm/node.h"

namespace rlx::shm {

class PointToPoint {
 public:
  struct Hooks {
    // An ErrorSite naming this rank, `operation`, the peer and the sizes.
    std::function<ErrorSite(std::string_view operation, int peer, std::string sizes)> site;
    // The transport cannot go on: record `error`, tell the other ranks.
    std::function<void(const CollectiveError& error)> fail;
  };

  PointToPoint(const Node& node, Mailbox& mailbox, const FailureLatch& latch,
               std::chrono::milliseconds timeout, SpinPolicy policy, Hooks hooks);
  ~PointToPoint();
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  // `to` and `from` are job ranks on this host (node.local_of(peer) >= 0).
  void send(int to, Tag tag, std::span<const std::byte> payload);
  std::vector<std::byte> recv(int from, Tag tag);
  // The next message from `from` with `tag`: read straight from the ring into
  // `into` when it fits (message_fits), else returned whole.
  struct Received {
    std::size_t length = 0;
    std::optional<std::vector<std::byte>> whole;  // set when it did not fit
  };
  Received recv_into(int from, Tag tag, std::span<std::byte> into, std::size_t element);
  // The same without waiting for a message that has not begun to arrive:
  // nullopt when none is there (a message begun is read to its end, with
  // the deadline).
  std::optional<Received> try_recv_into(int from, Tag tag, std::span<std::byte> into,
                                        std::size_t element);

 private:
  struct Inbound;
  struct Outbound;

  // Where a receive puts a message: `into` when it fits, else a vector.
  struct Target {
    std::span<std::byte> into;
    std::size_t element = 1;
    bool in_place = false;
    bool takes(std::size_t length) const {
      return in_place && message_fits(length, into.size(), element);
    }
  };
  // Waits for the message when `block`, else returns nullopt when none is there.
  std::optional<Received> receive(int from, Tag tag, Target target, bool block);
  Received place(std::vector<std::byte> message, const Target& target) const;

  RingWait wait_for(int local) const;
  // A message from `from` with `tag` that a reader of its ring parked in the
  // mailbox: taken at once (`until` unset, and only when one was parked), or
  // waited for until `until`.
  std::optional<std::vector<std::byte>> take_parked(Inbound& in, int from, Tag tag,
                                                    Deadline until = {});
  // Moves the message whose header was just taken into the mailbox; fails
  // the transport when that would pass RLX_UNEXPECTED_BYTES.
  void park_next(int local, Inbound& in, const RingHeader& header, RingWait& wait,
                 std::string_view operation);
  // Moves every whole message now in `from`'s ring to the mailbox; stops at
  // one that does not fit under the cap (which fails the transport).
  void drain(int local, Inbound& in);
  void drain_loop();
  // Reads the next message's payload after its header; fails the transport
  // when the sender stops mid-message.
  std::vector<std::byte> take_payload(int local, Inbound& in, const RingHeader& header,
                                      RingWait& wait, std::string_view operation);
  void read_payload(int local, Inbound& in, const RingHeader& header, RingWait& wait,
                    std::string_view operation, std::span<std::byte> into);
  // True when a message nobody waits for yet fits under RLX_UNEXPECTED_BYTES
  // (one a receiver waits for in the Mailbox always does).
  bool fits_under_cap(int from, const RingHeader& header) const;
  [[noreturn]] void fail_hard(CollectiveError error);
  // The error of a call that needed local peer `peer` (a job rank) after it
  // shut down cleanly; `what` ends the sentence.
  CollectiveError closed_error(const ErrorSite& site, int peer, std::string_view what) const;
  // Runs a ring operation; corrupt shared memory fails the transport.
  template <class Step>
  auto guarded(Step&& step) -> decltype(step());

  const Node& node_;
  Mailbox& mailbox_;
  const FailureLatch& latch_;
  const std::chrono::milliseconds timeout_;
  const SpinPolicy policy_;
  const Hooks hooks_;
  std::vector<std::unique_ptr<Inbound>> inbound_;    // [local sender]
  std::vector<std::unique_ptr<Outbound>> outbound_;  // [local receiver]
  std::atomic<bool> stopping_{false};
  std::thread drainer_;
};

}  // namespace rlx::shm
