#include "rlx/transport/shm/posted_call.h"

namespace rlx::shm {

PostedCall post(const CollectiveCall& call) {
  return {static_cast<std::uint8_t>(call.kind),
          static_cast<std::uint8_t>(call.op),
          static_cast<std::uint8_t>(call.dtype),
          0,
          call.root,
          call.count};
}

std::optional<CollectiveCall> read_posted(const PostedCall& posted, std::uint64_t sequence) {
  if (!valid_call_fields(posted.kind, posted.op, posted.dtype) || posted.reserved != 0) {
    return std::nullopt;
  }
  return CollectiveCall{static_cast<CollectiveKind>(posted.kind),
                        static_cast<ReduceOp>(posted.op),
                        static_cast<Dtype>(posted.dtype),
                        posted.count,
                        sequence,
                        posted.root};
}

}  // namespace rlx::shm
