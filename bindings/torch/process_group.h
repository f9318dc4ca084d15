// The "rlx" backend of torch.distributed: a c10d::ProcessGroup over an rlx
// group, for CPU tensors. Every collective rlx has (work_queue.h: Work and
// its Future for async_op=True), point-to-point with tags
// (point_to_point_work.h).
#pragma once

#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "bindings/torch/work_queue.h"
#include "rlx/group.h"

namespace rlx::torch_backend {

class ProcessGroupRlx final : public c10d::ProcessGroup {
 public:
  explicit ProcessGroupRlx(Group group);
  ~ProcessGroupRlx() override;

  const std::string getBackendName() const override { return "rlx"; }
  // rlx's name for the transport under it: tcp, verbs, ...
  std::string transport() const { return std::string(group_.backend()); }

  using Work = c10d::Work;
  using Tensors = std::vector<at::Tensor>;
  using TensorLists = std::vector<std::vector<at::Tensor>>;

  c10::intrusive_ptr<Work> broadcast(Tensors& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<Work> allreduce(Tensors& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<Work> allreduce_coalesced(
      Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<Work> reduce(Tensors& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<Work> allgather(TensorLists& outputs, Tensors& inputs,
                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<Work> gather(TensorLists& outputs, Tensors& inputs,
                                  const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<Work> scatter(Tensors& outputs, TensorLists& inputs,
                                   const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<Work> reduce_scatter(Tensors& outputs, TensorLists& inputs,
                                          const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                         std::vector<int64_t>& output_splits,
                                         std::vector<int64_t>& input_splits,
                                         const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<Work> alltoall(Tensors& outputs, Tensors& inputs,
                                    const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<Work> send(Tensors& tensors, int to, int tag) override;
  c10::intrusive_ptr<Work> recv(Tensors& tensors, int from, int tag) override;

 private:
  c10::intrusive_ptr<Work> enqueue(c10d::OpType type, const char* title, Tensors outputs,
                                   std::function<void()> run);
  // Bytes of the queue thread's staging buffer, grown as calls need and kept.
  std::span<std::byte> scratch(std::size_t bytes);
  void check_root(std::int64_t root, const char* call) const;

  Group group_;
  std::vector<std::byte> scratch_;
  WorkQueue queue_;  // last: stops (running what was queued) before the rest goes
};

}  // namespace rlx::torch_backend
