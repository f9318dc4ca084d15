#include "collectives/links.h"

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
  }
  return "unknown collective";
}

std::string CollectiveCall::describe() const {
  std::string text(name_of(kind));
  if (kind == CollectiveKind::all_reduce || kind == CollectiveKind::reduce_scatter) {
    text += " " + std::string(name_of(op));
  }
  if (kind != CollectiveKind::barrier) text += " of " + describe_elements(count, dtype);
  if (kind == CollectiveKind::broadcast) text += " from rank " + std::to_string(root);
  return text + ", collective #" + std::to_string(sequence);
}

}  // namespace rlx
