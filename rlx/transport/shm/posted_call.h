// A collective call as a rank posts it in shared memory for the other ranks
// of its host to check against their own (rlx/collectives/shm_collectives.h).
#pragma once

#include <cstdint>
#include <optional>

#include "rlx/transport/collective_call.h"

namespace rlx::shm {

// A collective as it is posted in shared memory: the CollectiveCall, checked
// field by field when read (a corrupt or foreign segment is not trusted).
struct PostedCall {
  std::uint8_t kind = 0;
  std::uint8_t op = 0;
  std::uint8_t dtype = 0;
  std::uint8_t reserved = 0;
  std::int32_t root = -1;
  std::uint64_t count = 0;
};
static_assert(sizeof(PostedCall) == 16);

PostedCall post(const CollectiveCall& call);
// The call `posted` describes, with `sequence`; empty when a field is out of
// its range or `reserved` is not 0 (a corrupt or foreign segment).
std::optional<CollectiveCall> read_posted(const PostedCall& posted, std::uint64_t sequence);

}  // namespace rlx::shm
