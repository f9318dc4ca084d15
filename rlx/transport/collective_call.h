// What a rank is doing in one collective call: the description every
// backend checks across ranks (TCP and verbs carry it in each step's frame
// header, shared memory posts it in the rank's call line, MPI all-reduces a
// digest of it before the call), so ranks that called different collectives,
// or the same one with different sizes, fail with mismatch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rlx/transport/transport.h"

namespace rlx {

enum class CollectiveKind : std::uint8_t {
  all_reduce = 1,
  all_gather = 2,
  reduce_scatter = 3,
  broadcast = 4,
  barrier = 5,
  all_to_all = 6,
  all_gather_v = 7,  // count: the gathered total
  all_to_all_v = 8,  // count: 0 (each pair's sizes are checked on the wire)
  reduce = 9,
  gather = 10,   // count: each rank's contribution
  scatter = 11,  // count: each rank's share
};

std::string_view name_of(CollectiveKind kind);

// A transport's own set-up collectives are numbered from here, apart from
// the user's (whose first is #0 whatever set-up ran).
inline constexpr std::uint64_t kSetupSequence = std::uint64_t{1} << 63;

// What a rank is doing: the same on every rank for one collective call.
struct CollectiveCall {
  CollectiveKind kind = CollectiveKind::barrier;
  ReduceOp op = ReduceOp::sum;
  Dtype dtype = Dtype::u8;
  // Elements per rank (all_gather: each rank's contribution; all_to_all: one
  // block, what each rank sends each rank).
  std::uint64_t count = 0;
  std::uint64_t sequence = 0;  // how many collectives this group ran before
  std::int32_t root = -1;      // broadcast, reduce, gather and scatter

  friend bool operator==(const CollectiveCall&, const CollectiveCall&) = default;
  // "all_reduce sum of 1024 x f32 (4 KiB), collective #7".
  std::string describe() const;
};

// The mismatch a rank in `mine` reports on finding `peer` in `theirs`,
// naming both calls (and `detail`, such as which step), alike on every backend.
CollectiveError call_mismatch(ErrorSite site, const CollectiveCall& mine, int peer,
                              const CollectiveCall& theirs, const std::string& detail = {});

}  // namespace rlx
