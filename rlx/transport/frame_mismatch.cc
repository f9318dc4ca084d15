#include "rlx/transport/frame_mismatch.h"

#include <string>

namespace rlx::wire {

std::optional<CollectiveError> step_mismatch(const ErrorSite& site, const CollectiveCall& mine,
                                             std::uint32_t step, std::size_t expected_bytes,
                                             int peer, const FrameHeader& header) {
  const CollectiveCall theirs = call_of(header);
  const bool same_step = header.tag == step && header.length == expected_bytes;
  if (theirs == mine && same_step) return std::nullopt;
  return call_mismatch(site, mine, peer, theirs,
                       theirs == mine
                           ? " (step " + std::to_string(header.tag) + " of " +
                                 format_bytes(header.length) + ", expected step " +
                                 std::to_string(step) + " of " + format_bytes(expected_bytes) + ")"
                           : "");
}

std::optional<CollectiveError> other_call(const ErrorSite& site, const CollectiveCall& mine,
                                          int peer, const FrameHeader& header) {
  const CollectiveCall theirs = call_of(header);
  if (theirs.sequence != mine.sequence || theirs == mine) return std::nullopt;
  return call_mismatch(site, mine, peer, theirs);
}

}  // namespace rlx::wire
