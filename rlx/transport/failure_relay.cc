#include "rlx/transport/failure_relay.h"

#include <algorithm>
#include <string>
#include <utility>

namespace rlx {

FailureRelay::FailureRelay(int rank, FailureLatch& latch, Mailbox& mailbox,
                           SendToPeers send_to_peers)
    : rank_(rank), latch_(latch), mailbox_(mailbox), send_to_peers_(std::move(send_to_peers)) {}

bool FailureRelay::trip(const CollectiveError& error, bool heard_from_peer) {
  const auto pointer = std::make_exception_ptr(error);
  if (!latch_.trip(pointer)) return false;
  mailbox_.fail(-1, pointer);
  if (heard_from_peer) {
    std::lock_guard lock(mutex_);
    heard_ = error;
  }
  return true;
}

void FailureRelay::tell_peers(const CollectiveError& error) {
  const std::string text = error.what();
  const auto bytes =
      std::as_bytes(std::span(text.data(), std::min(text.size(), wire::kMaxAbortTextBytes)));
  send_to_peers_(wire::abort_header(error, rank_, bytes.size()), bytes);
}

void FailureRelay::say_goodbye() {
  std::optional<CollectiveError> heard;
  {
    std::lock_guard lock(mutex_);
    heard = heard_;
  }
  if (heard) tell_peers(*heard);
  send_to_peers_({.kind = wire::FrameKind::close}, {});
}

}  // namespace rlx
