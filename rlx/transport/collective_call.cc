#include "rlx/transport/collective_call.h"

#include <utility>

namespace rlx {

std::string_view name_of(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::all_reduce:
      return "all_reduce";
    case CollectiveKind::all_gather:
      return "all_gather";
    case CollectiveKind::reduce_scatter:
      return "reduce_scatter";
    case CollectiveKind::broadcast:
      return "broadcast";
    case CollectiveKind::barrier:
      return "barrier";
    case CollectiveKind::all_to_all:
      return "all_to_all";
    case CollectiveKind::all_gather_v:
      return "all_gather_v";
    case CollectiveKind::all_to_all_v:
      return "all_to_all_v";
    case CollectiveKind::reduce:
      return "reduce";
    case CollectiveKind::gather:
      return "gather";
    case CollectiveKind::scatter:
      return "scatter";
  }
  return "unknown collective";
}

std::string CollectiveCall::describe() const {
  // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict) on literal + temporary.
  std::string text(name_of(kind));
  if (kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter ||
      kind == CollectiveKind::reduce) {
    text.append(" ").append(name_of(op));
  }
  if (kind == CollectiveKind::all_to_all) {
    text.append(" of blocks of ").append(describe_elements(count, dtype));
  } else if (kind == CollectiveKind::all_to_all_v) {
    text.append(" of ").append(name_of(dtype));
  } else if (kind != CollectiveKind::barrier) {
    text.append(" of ").append(describe_elements(count, dtype));
  }
  if (kind == CollectiveKind::broadcast || kind == CollectiveKind::scatter) {
    text.append(" from rank ").append(std::to_string(root));
  }
  if (kind == CollectiveKind::reduce || kind == CollectiveKind::gather) {
    text.append(" to rank ").append(std::to_string(root));
  }
  if (sequence >= kSetupSequence) {
    return text.append(", set-up call #").append(std::to_string(sequence - kSetupSequence));
  }
  return text.append(", collective #").append(std::to_string(sequence));
}

CollectiveError call_mismatch(ErrorSite site, const CollectiveCall& mine, int peer,
                              const CollectiveCall& theirs, const std::string& detail) {
  site.peer = peer;
  return CollectiveError(ErrorKind::mismatch, std::move(site),
                         "this rank called " + mine.describe() + " but rank " +
                             std::to_string(peer) + " called " + theirs.describe() + detail,
                         "every rank must call the same collectives in the same order with the "
                         "same sizes");
}

}  // namespace rlx
