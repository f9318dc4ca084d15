#include "rlx/collectives/subgroup_links.h"

#include <algorithm>

namespace rlx {

SubgroupLinks::SubgroupLinks(Links& parent, std::vector<int> members)
    : parent_(parent), members_(std::move(members)) {
  const auto self = std::find(members_.begin(), members_.end(), parent.rank());
  if (self == members_.end()) {
    throw CollectiveError(ErrorKind::invalid_argument,
                          {.rank = parent.rank(), .world_size = parent.world_size()},
                          "a subgroup must include the rank that uses it");
  }
  rank_ = static_cast<int>(self - members_.begin());
}

void SubgroupLinks::exchange(const CollectiveCall& call, std::uint32_t step,
                             std::span<const StepSend> sends, std::span<const StepRecv> recvs) {
  sends_.assign(sends.begin(), sends.end());
  recvs_.assign(recvs.begin(), recvs.end());
  for (auto& s : sends_) s.peer = members_.at(static_cast<std::size_t>(s.peer));
  for (auto& r : recvs_) r.peer = members_.at(static_cast<std::size_t>(r.peer));
  parent_.exchange(call, step, sends_, recvs_);
}

}  // namespace rlx
