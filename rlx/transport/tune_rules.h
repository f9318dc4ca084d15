// RLX_TUNE: which algorithm a collective runs at which sizes, overriding the
// default choice (rlx/collectives/algorithm_table.h), as UCC's TUNE strings do.
//
//   RLX_TUNE="all_gather:0-256k:recursive_doubling,256k-inf:ring;all_reduce:ring"
//
// Entries are separated by ';' (or '#', as UCC's, which needs no quoting in
// a shell or a CMake list), one per collective: its name, ':', then
// ranges separated by ','. A range is `FROM-TO:ALGORITHM` (bytes, FROM
// included, TO not; k, m and g multiply by 1024, 1024^2, 1024^3; TO may be
// `inf`) or just `ALGORITHM` (every size). Sizes no range covers keep the
// default. This file reads the syntax only: rlxrun checks it before any rank
// starts; the names are checked against the tables when a group starts
// (rlx/collectives/tuning.h), where the tables live.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::launch_env {

inline constexpr std::uint64_t kNoUpperBound = std::numeric_limits<std::uint64_t>::max();

struct TuneRule {
  std::string collective;  // as written: all_reduce, all_gather, ...
  std::uint64_t from_bytes = 0;
  std::uint64_t to_bytes = kNoUpperBound;  // excluded
  std::string algorithm;
  std::string text;  // the rule as written, "all_gather:0-256k:recursive_doubling", for messages

  friend bool operator==(const TuneRule&, const TuneRule&) = default;
};

// The rules of an RLX_TUNE value, in the order written. Throws
// CollectiveError (invalid_argument) quoting the variable, the part that is
// malformed and the syntax; also when two ranges of one collective overlap.
std::vector<TuneRule> parse_tune(std::string_view text);

}  // namespace rlx::launch_env
