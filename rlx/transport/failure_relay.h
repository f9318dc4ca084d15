// How a failure travels between the ranks of a backend whose peers exchange
// frames (TCP, verbs): one protocol, so every such backend reports alike.
//   * The first failure wins: it trips the latch and wakes every receive.
//   * This rank's own failure goes to every peer as an abort frame that
//     blames the rank the error names (wire::abort_header); a receiver turns
//     it into its own failure with wire::relayed_failure.
//   * A failure heard from a peer is not echoed at once but passed on at
//     close: ranks still waiting on this one then report the cause, not a
//     lost peer (this rank's close could overtake the first abort on their
//     links).
//   * Then a close frame to every peer; a receiver fails only the receives
//     from that peer (peer_shut_down).
#pragma once

#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <span>

#include "rlx/transport/errors.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/frame.h"
#include "rlx/transport/mailbox.h"

namespace rlx {

class FailureRelay {
 public:
  // Sends one frame to every peer still connected, skipping any that is gone
  // (best effort: the others must still hear).
  using SendToPeers =
      std::function<void(const wire::FrameHeader& header, std::span<const std::byte> payload)>;

  FailureRelay(int rank, FailureLatch& latch, Mailbox& mailbox, SendToPeers send_to_peers);

  // Records `error` as the transport's failure and wakes every receive;
  // false when an earlier failure did so already. `heard_from_peer`: it
  // came in a peer's abort frame, and is passed on at close.
  bool trip(const CollectiveError& error, bool heard_from_peer);
  // Sends `error`, this rank's own failure, to every peer as an abort.
  void tell_peers(const CollectiveError& error);
  // At close: passes on the failure heard from a peer, if any, then sends
  // every peer a close frame.
  void say_goodbye();

 private:
  int rank_;
  FailureLatch& latch_;
  Mailbox& mailbox_;
  SendToPeers send_to_peers_;
  std::mutex mutex_;
  std::optional<CollectiveError> heard_;  // guarded by mutex_
};

}  // namespace rlx
