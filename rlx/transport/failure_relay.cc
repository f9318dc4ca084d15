#include "rlx/transport/failure_relay.h"

#include <string>
#include <string_view>
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

namespace {

// An error's text within `limit` bytes: a long one loses its middle, so
// that what failed (the start) and what to check (the end) both arrive.
std::string within(std::string text, std::size_t limit) {
  if (text.size() <= limit) return text;
  constexpr std::string_view kCut = " [...] ";
  const std::size_t tail = limit / 4;
  const std::size_t head = limit - tail - kCut.size();
  return text.substr(0, head).append(kCut).append(text, text.size() - tail, tail);
}

}  // namespace

void FailureRelay::tell_peers(const CollectiveError& error) {
  const std::string text = within(error.what(), wire::kMaxAbortTextBytes);
  send_to_peers_(wire::abort_header(error, rank_, text.size()), std::as_bytes(std::span(text)));
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
