#include "bindings/torch/process_group.h"

#include <cstring>
#include <numeric>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include "bindings/torch/point_to_point_work.h"
#include "bindings/torch/tensors.h"

namespace rlx::torch_backend {
namespace {

using c10d::OpType;

// Data that moves without being reduced goes as bytes: every dtype torch
// has, and one signature check of the byte count.
ElementSpan as_bytes(at::Tensor& tensor) { return {tensor.data_ptr(), tensor.nbytes(), Dtype::u8}; }
ElementSpan as_bytes(std::span<std::byte> bytes) { return {bytes.data(), bytes.size(), Dtype::u8}; }

at::Tensor& only_tensor(std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "rlx: ", call, " takes one tensor per rank, not ",
              tensors.size(), " (rlx runs CPU tensors, one per process)");
  check_dense_cpu(tensors[0], call);
  return tensors[0];
}

// Every tensor of `list` as `like` (dtype and element count), `expected` of them.
void check_alike(const std::vector<at::Tensor>& list, const at::Tensor& like, std::size_t expected,
                 const char* call) {
  TORCH_CHECK(list.size() == expected, "rlx: ", call, " takes a list of ", expected,
              " tensors (one per rank), not ", list.size());
  for (const at::Tensor& t : list) {
    check_dense_cpu(t, call);
    TORCH_CHECK(t.scalar_type() == like.scalar_type() && t.numel() == like.numel(), "rlx: ", call,
                ": every tensor of the list must have the dtype and size of the input (",
                dtype_name(like.scalar_type()), ", ", like.numel(), " elements), not ",
                dtype_name(t.scalar_type()), ", ", t.numel());
  }
}

// Copies `list` into consecutive blocks of `into`.
void pack(const std::vector<at::Tensor>& list, std::span<std::byte> into) {
  std::size_t offset = 0;
  for (const at::Tensor& t : list) {
    const at::Tensor dense = t.contiguous();
    std::memcpy(into.data() + offset, dense.data_ptr(), dense.nbytes());
    offset += dense.nbytes();
  }
}

// Copies consecutive blocks of `from` into `list`.
void unpack(std::span<const std::byte> from, std::vector<at::Tensor>& list) {
  std::size_t offset = 0;
  for (at::Tensor& t : list) {
    const at::Tensor block = at::from_blob(const_cast<std::byte*>(from.data() + offset), t.sizes(),
                                           at::TensorOptions().dtype(t.scalar_type()));
    t.copy_(block);
    offset += t.nbytes();
  }
}

std::size_t total_bytes(const std::vector<at::Tensor>& list) {
  return std::accumulate(list.begin(), list.end(), std::size_t{0},
                         [](std::size_t sum, const at::Tensor& t) { return sum + t.nbytes(); });
}

// Bytes per rank from all_to_all's split sizes (rows of dim 0), or equal
// blocks when torch gives none.
std::vector<std::size_t> split_bytes(const at::Tensor& t, const std::vector<int64_t>& splits,
                                     int size, const char* side) {
  std::vector<std::size_t> bytes(static_cast<std::size_t>(size));
  if (splits.empty()) {
    TORCH_CHECK(t.numel() % size == 0, "rlx: alltoall_base's ", side, " has ", t.numel(),
                " elements, which ", size, " ranks cannot share equally; give split sizes");
    std::fill(bytes.begin(), bytes.end(), t.nbytes() / static_cast<std::size_t>(size));
    return bytes;
  }
  TORCH_CHECK(splits.size() == bytes.size(), "rlx: alltoall_base's ", side, " split sizes list ",
              splits.size(), " entries for ", size, " ranks");
  TORCH_CHECK(t.dim() > 0, "rlx: alltoall_base's ", side,
              " has no dimension to split; split sizes count rows of dimension 0");
  const int64_t rows = t.size(0);
  const std::size_t row = rows == 0 ? 0 : t.nbytes() / static_cast<std::size_t>(rows);
  int64_t total = 0;
  for (std::size_t r = 0; r < bytes.size(); ++r) {
    // Each at most the rows there are, so the sum cannot overflow either.
    TORCH_CHECK(splits[r] >= 0 && splits[r] <= rows, "rlx: alltoall_base's ", side,
                " split size for rank ", r, " is ", splits[r], ", not one from 0 to the tensor's ",
                rows, " rows");
    total += splits[r];
    bytes[r] = static_cast<std::size_t>(splits[r]) * row;
  }
  TORCH_CHECK(total == rows, "rlx: alltoall_base's ", side, " split sizes add up to ", total,
              " rows, but the tensor has ", rows);
  return bytes;
}

void average(at::Tensor& t, const Reduction& r, int size) {
  if (r.average) t.div_(size);
}

}  // namespace

ProcessGroupRlx::ProcessGroupRlx(Group group)
    : ProcessGroup(group.rank(), group.size()), group_(std::move(group)) {}

// The queue's thread may have to take the GIL to drop the last reference to
// a tensor a Python object owns (an async call whose Work and tensor Python
// let go of): waiting for it with the GIL held would wait forever.
ProcessGroupRlx::~ProcessGroupRlx() {
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release released;
    queue_.stop();
  } else {
    queue_.stop();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::enqueue(OpType type, const char* title,
                                                        Tensors outputs,
                                                        std::function<void()> run) {
  auto work =
      c10::make_intrusive<QueuedWork>(rank_, type, title, std::move(outputs), std::move(run));
  queue_.push(work);
  return work;
}

std::span<std::byte> ProcessGroupRlx::scratch(std::size_t bytes) {
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  return {scratch_.data(), bytes};
}

void ProcessGroupRlx::check_root(std::int64_t root, const char* call) const {
  TORCH_CHECK(root >= 0 && root < size_, "rlx: ", call, "'s root is rank ", root,
              ", not one of the group's ", size_, " ranks");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::broadcast(Tensors& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  at::Tensor t = only_tensor(tensors, "broadcast");
  check_root(opts.rootRank, "broadcast");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(OpType::BROADCAST, "rlx:broadcast", tensors, [this, t, root] {
    Dense dense(t);
    group_->broadcast(as_bytes(dense.get()), root);
    dense.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::allreduce(Tensors& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  at::Tensor t = only_tensor(tensors, "allreduce");
  const Reduction r = reduction_for(t, opts.reduceOp, "allreduce");
  return enqueue(OpType::ALLREDUCE, "rlx:all_reduce", tensors, [this, t, r] {
    Dense dense(t);
    group_->all_reduce(elements_of(dense.get(), r.dtype), r.op);
    average(dense.get(), r, size_);
    dense.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::allreduce_coalesced(
    Tensors& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "rlx: allreduce_coalesced takes at least one tensor");
  for (const at::Tensor& t : tensors) {
    check_dense_cpu(t, "allreduce_coalesced");
    TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                "rlx: allreduce_coalesced takes tensors of one dtype, not ",
                dtype_name(tensors[0].scalar_type()), " and ", dtype_name(t.scalar_type()));
  }
  const Reduction r = reduction_for(tensors[0], opts.reduceOp, "allreduce_coalesced");
  return enqueue(OpType::ALLREDUCE_COALESCED, "rlx:all_reduce_coalesced", tensors,
                 [this, tensors, r]() mutable {
                   std::vector<at::Tensor> flat;
                   for (const at::Tensor& t : tensors) flat.push_back(t.reshape(-1));
                   at::Tensor joined = at::cat(flat);
                   group_->all_reduce(elements_of(joined, r.dtype), r.op);
                   average(joined, r, size_);
                   int64_t offset = 0;
                   for (at::Tensor& t : tensors) {
                     t.copy_(joined.slice(0, offset, offset + t.numel()).view(t.sizes()));
                     offset += t.numel();
                   }
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::reduce(Tensors& tensors,
                                                       const c10d::ReduceOptions& opts) {
  at::Tensor t = only_tensor(tensors, "reduce");
  check_root(opts.rootRank, "reduce");
  const Reduction r = reduction_for(t, opts.reduceOp, "reduce");
  const int root = static_cast<int>(opts.rootRank);
  return enqueue(OpType::REDUCE, "rlx:reduce", tensors, [this, t, r, root] {
    Dense dense(t);
    group_->reduce(elements_of(dense.get(), r.dtype), r.op, root);
    if (rank_ == root) average(dense.get(), r, size_);
    dense.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::allgather(TensorLists& outputs, Tensors& inputs,
                                                          const c10d::AllgatherOptions&) {
  at::Tensor in = only_tensor(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "rlx: allgather takes one output list, not ", outputs.size());
  check_alike(outputs[0], in, static_cast<std::size_t>(size_), "allgather");
  Tensors out = outputs[0];
  return enqueue(OpType::ALLGATHER, "rlx:all_gather", out, [this, in, out]() mutable {
    const at::Tensor dense = in.contiguous();
    const std::span<std::byte> all = scratch(dense.nbytes() * static_cast<std::size_t>(size_));
    group_->all_gather(as_bytes(const_cast<at::Tensor&>(dense)), as_bytes(all));
    unpack(all, out);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::_allgather_base(at::Tensor& output,
                                                                at::Tensor& input,
                                                                const c10d::AllgatherOptions&) {
  check_dense_cpu(input, "_allgather_base");
  check_dense_cpu(output, "_allgather_base");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
      "rlx: _allgather_base's output must hold ", size_, " inputs (", input.numel() * size_, " x ",
      dtype_name(input.scalar_type()), "), not ", output.numel(), " x ",
      dtype_name(output.scalar_type()));
  return enqueue(OpType::_ALLGATHER_BASE, "rlx:all_gather_base", {output}, [this, input, output] {
    at::Tensor in = input.contiguous();
    Dense out(output);
    group_->all_gather(as_bytes(in), as_bytes(out.get()));
    out.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::gather(TensorLists& outputs, Tensors& inputs,
                                                       const c10d::GatherOptions& opts) {
  at::Tensor in = only_tensor(inputs, "gather");
  check_root(opts.rootRank, "gather");
  const int root = static_cast<int>(opts.rootRank);
  Tensors out;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1, "rlx: gather's root takes one output list, not ",
                outputs.size());
    check_alike(outputs[0], in, static_cast<std::size_t>(size_), "gather");
    out = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(),
                "rlx: gather takes an output list on its root alone (rank ", root, ")");
  }
  return enqueue(OpType::GATHER, "rlx:gather", out, [this, in, out, root]() mutable {
    at::Tensor dense = in.contiguous();
    const std::size_t all = rank_ == root ? dense.nbytes() * static_cast<std::size_t>(size_) : 0;
    const std::span<std::byte> gathered = scratch(all);
    group_->gather(as_bytes(dense), {gathered.data(), dense.nbytes() * size_, Dtype::u8}, root);
    if (rank_ == root) unpack(gathered, out);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::scatter(Tensors& outputs, TensorLists& inputs,
                                                        const c10d::ScatterOptions& opts) {
  at::Tensor out = only_tensor(outputs, "scatter");
  check_root(opts.rootRank, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  Tensors in;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1, "rlx: scatter's root takes one input list, not ",
                inputs.size());
    check_alike(inputs[0], out, static_cast<std::size_t>(size_), "scatter");
    in = inputs[0];
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(),
                "rlx: scatter takes an input list on its root alone (rank ", root, ")");
  }
  return enqueue(OpType::SCATTER, "rlx:scatter", outputs, [this, in, out, root] {
    Dense dense(out);
    const std::size_t all = rank_ == root ? dense.get().nbytes() * size_ : 0;
    const std::span<std::byte> blocks = scratch(all);
    if (rank_ == root) pack(in, blocks);
    group_->scatter({blocks.data(), dense.get().nbytes() * size_, Dtype::u8}, as_bytes(dense.get()),
                    root);
    dense.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::reduce_scatter(
    Tensors& outputs, TensorLists& inputs, const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = only_tensor(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "rlx: reduce_scatter takes one input list, not ", inputs.size());
  check_alike(inputs[0], out, static_cast<std::size_t>(size_), "reduce_scatter");
  const Reduction r = reduction_for(out, opts.reduceOp, "reduce_scatter");
  Tensors in = inputs[0];
  return enqueue(OpType::REDUCE_SCATTER, "rlx:reduce_scatter", outputs, [this, in, out, r] {
    Dense dense(out);
    const std::span<std::byte> blocks = scratch(dense.get().nbytes() * size_);
    pack(in, blocks);
    group_->reduce_scatter({blocks.data(), static_cast<std::size_t>(out.numel()) * size_, r.dtype},
                           elements_of(dense.get(), r.dtype), r.op);
    average(dense.get(), r, size_);
    dense.write_back();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_dense_cpu(input, "_reduce_scatter_base");
  check_dense_cpu(output, "_reduce_scatter_base");
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * size_,
      "rlx: _reduce_scatter_base's input must hold ", size_, " outputs (", output.numel() * size_,
      " x ", dtype_name(output.scalar_type()), "), not ", input.numel(), " x ",
      dtype_name(input.scalar_type()));
  const Reduction r = reduction_for(output, opts.reduceOp, "_reduce_scatter_base");
  return enqueue(
      OpType::_REDUCE_SCATTER_BASE, "rlx:reduce_scatter_base", {output}, [this, input, output, r] {
        at::Tensor in = input.contiguous();
        Dense out(output);
        group_->reduce_scatter(elements_of(in, r.dtype), elements_of(out.get(), r.dtype), r.op);
        average(out.get(), r, size_);
        out.write_back();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& output_splits,
                                                              std::vector<int64_t>& input_splits,
                                                              const c10d::AllToAllOptions&) {
  check_dense_cpu(input, "alltoall_base");
  check_dense_cpu(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "rlx: alltoall_base's output and input must have one dtype, not ",
              dtype_name(output.scalar_type()), " and ", dtype_name(input.scalar_type()));
  std::vector<std::size_t> send = split_bytes(input, input_splits, size_, "input");
  std::vector<std::size_t> receive = split_bytes(output, output_splits, size_, "output");
  return enqueue(OpType::ALLTOALL_BASE, "rlx:all_to_all_base", {output},
                 [this, input, output, send, receive] {
                   at::Tensor in = input.contiguous();
                   Dense out(output);
                   group_->all_to_all_v(as_bytes(in), send, as_bytes(out.get()), receive);
                   out.write_back();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::alltoall(Tensors& outputs, Tensors& inputs,
                                                         const c10d::AllToAllOptions&) {
  TORCH_CHECK(outputs.size() == static_cast<std::size_t>(size_) && inputs.size() == outputs.size(),
              "rlx: alltoall takes ", size_, " input and ", size_, " output tensors, not ",
              inputs.size(), " and ", outputs.size());
  std::vector<std::size_t> send;
  std::vector<std::size_t> receive;
  for (std::size_t r = 0; r < outputs.size(); ++r) {
    check_dense_cpu(inputs[r], "alltoall");
    check_dense_cpu(outputs[r], "alltoall");
    TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                    outputs[r].scalar_type() == inputs[0].scalar_type(),
                "rlx: alltoall takes tensors of one dtype");
    send.push_back(inputs[r].nbytes());
    receive.push_back(outputs[r].nbytes());
  }
  return enqueue(OpType::ALLTOALL, "rlx:all_to_all", outputs,
                 [this, inputs, outputs, send, receive]() mutable {
                   const std::size_t sent = total_bytes(inputs);
                   const std::span<std::byte> both = scratch(sent + total_bytes(outputs));
                   pack(inputs, both.first(sent));
                   group_->all_to_all_v(as_bytes(both.first(sent)), send,
                                        as_bytes(both.subspan(sent)), receive);
                   unpack(both.subspan(sent), outputs);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::barrier(const c10d::BarrierOptions&) {
  return enqueue(OpType::BARRIER, "rlx:barrier", {}, [this] { group_->barrier(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::send(Tensors& tensors, int to, int tag) {
  at::Tensor t = only_tensor(tensors, "send");
  TORCH_CHECK(tag >= 0, "rlx: send's tag must not be negative, not ", tag);
  reap_orphans();
  at::Tensor dense = t.contiguous();
  Request request = group_->isend(to, static_cast<Tag>(tag), bytes_of(std::as_const(dense)));
  return c10::make_intrusive<PointToPointWork>(rank_, OpType::SEND, "rlx:send", tensors,
                                               Tensors{dense}, std::move(request));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRlx::recv(Tensors& tensors, int from, int tag) {
  at::Tensor t = only_tensor(tensors, "recv");
  TORCH_CHECK(tag >= 0, "rlx: recv's tag must not be negative, not ", tag);
  reap_orphans();
  auto dense = std::make_shared<Dense>(t);
  Request request = group_->irecv(from, static_cast<Tag>(tag), bytes_of(dense->get()));
  const std::size_t expected = t.nbytes();
  return c10::make_intrusive<PointToPointWork>(
      rank_, OpType::RECV, "rlx:recv", tensors, Tensors{dense->get()}, std::move(request),
      [dense, expected, from, tag](std::size_t received) {
        TORCH_CHECK(received == expected, "rlx: recv from rank ", from, " (tag ", tag, ") got ",
                    received, " bytes for a tensor of ", expected,
                    "; the sender's tensor must have the receiver's size and dtype");
        dense->write_back();
      });
}

}  // namespace rlx::torch_backend
