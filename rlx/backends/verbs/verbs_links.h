// Links over the verbs engine: how the algorithms of rlx/collectives/ run on RDMA.
// One queue pair per pair of ranks, so one lane; each step's sends stream as
// ring chunks and its receives are copied or reduced out of the ring as the
// chunks land. The CollectiveCall travels in every chunk's header and is
// checked on arrival, so mismatched ranks fail with ErrorKind::mismatch.
#pragma once

#include <vector>

#include "rlx/backends/verbs/engine.h"
#include "rlx/collectives/links.h"

namespace rlx::verbs {

class VerbsLinks final : public Links {
 public:
  VerbsLinks(int rank, int world_size, Engine& engine)
      : rank_(rank), world_size_(world_size), engine_(engine) {}

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int lanes() const override { return 1; }
  void exchange(const CollectiveCall& call, std::uint32_t step, std::span<const StepSend> sends,
                std::span<const StepRecv> recvs) override {
    engine_.exchange(call, step, sends, recvs);
  }
  std::span<std::byte> scratch(std::size_t bytes) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_;
  }

 private:
  int rank_, world_size_;
  Engine& engine_;
  std::vector<std::byte> scratch_;
};

}  // namespace rlx::verbs
