// Whether a collective frame belongs where a step finds it: the one test
// of TCP's lanes and of verbs, beside the frame header (frame.h) but apart
// from it, so the header's decoder stands alone (tests/fuzz).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "rlx/transport/collective_call.h"
#include "rlx/transport/errors.h"
#include "rlx/transport/frame.h"

namespace rlx::wire {

// What a collective step that expects step `step` of `expected_bytes` of
// `mine` makes of the header of `peer`'s next frame: nothing when it is
// that step's, else the mismatch naming both calls (and both steps when
// the calls are the same). TCP's lanes and verbs alike.
std::optional<CollectiveError> step_mismatch(const ErrorSite& site, const CollectiveCall& mine,
                                             std::uint32_t step, std::size_t expected_bytes,
                                             int peer, const FrameHeader& header);

// The same for a frame that no step reads yet (a peer outside the step):
// a mismatch only when it is a step of another call with `mine`'s number.
std::optional<CollectiveError> other_call(const ErrorSite& site, const CollectiveCall& mine,
                                          int peer, const FrameHeader& header);

}  // namespace rlx::wire
