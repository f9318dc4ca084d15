// The Links of some of a group's ranks, renumbered 0..members-1 in the order
// given: how hierarchical collectives run an algorithm of this folder among
// the leaders of each host, or among the ranks with the same index on every
// host, over the parent's connections.
#pragma once

#include <vector>

#include "rlx/collectives/links.h"

namespace rlx {

class SubgroupLinks final : public Links {
 public:
  // `members` are ranks of `parent`, this rank among them.
  SubgroupLinks(Links& parent, std::vector<int> members);

  int rank() const override { return rank_; }
  int world_size() const override { return static_cast<int>(members_.size()); }
  int lanes() const override { return parent_.lanes(); }
  void exchange(const CollectiveCall& call, std::uint32_t step, std::span<const StepSend> sends,
                std::span<const StepRecv> recvs) override;
  std::span<std::byte> scratch(std::size_t bytes) override { return parent_.scratch(bytes); }

 private:
  Links& parent_;
  std::vector<int> members_;
  int rank_ = -1;
  std::vector<StepSend> sends_;  // reused: no allocation per step once warm
  std::vector<StepRecv> recvs_;
};

}  // namespace rlx
