// MpiTransport's rooted collectives and all-to-all: agreement first, as
// every collective, then MPI_Reduce, MPI_Gather, MPI_Scatter, MPI_Bcast and
// MPI_Alltoall, in pieces of at most
// max_message_bytes so MPI's int counts never overflow.
#include <algorithm>
#include <climits>

#include "rlx/backends/mpi/datatypes.h"
#include "rlx/backends/mpi/mpi_transport.h"

namespace rlx::mpi {

void MpiTransport::agree_on_rooted(const CollectiveCall& call) {
  // The cell has room for a count, not a root: it carries count x n + root,
  // one number per (count, root), so ranks that disagree on either differ.
  const auto n = static_cast<std::uint64_t>(world_size());
  std::uint64_t key = 0;
  if (__builtin_mul_overflow(call.count, n, &key) || key + n >= CallAgreement::kCountLimit) {
    throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                          "the MPI transport's rooted collectives take at most 2^53 / world_size "
                          "elements",
                          "split the call into several");
  }
  CollectiveCall signature = call;
  signature.count = key + static_cast<std::uint64_t>(call.root);
  agreement_.prepare(signature, 0);
  agree_on(call);
}

void MpiTransport::do_reduce(ElementSpan data, ReduceOp op, int root) {
  check_usable("reduce");
  p2p_->reap_sends();
  const CollectiveCall call = next_call(CollectiveKind::reduce, op, data.dtype, data.count, root);
  agree_on_rooted(call);
  if (data.count > piece_elements_[static_cast<std::size_t>(data.dtype)]) {
    throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                          "more elements than one MPI call can carry",
                          "split the reduce into several calls");
  }
  const Reduction reduction = reduction_for(data.dtype, op);
  const bool at_root = rank() == root;
  run_watched(call, "MPI_Reduce", [&] {
    return MPI_Reduce(at_root ? MPI_IN_PLACE : data.data, at_root ? data.data : nullptr,
                      static_cast<int>(data.count), reduction.type, reduction.op, root, comm_);
  });
}

void MpiTransport::do_gather(ConstElementSpan input, ElementSpan output, int root) {
  check_usable("gather");
  p2p_->reap_sends();
  const CollectiveCall call =
      next_call(CollectiveKind::gather, ReduceOp::sum, input.dtype, input.count, root);
  agree_on_rooted(call);
  const std::size_t block = input.bytes();
  if (block > options_.max_message_bytes) {
    throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                          "each rank's block exceeds what one MPI call can carry",
                          "split the gather into several calls");
  }
  auto* out = static_cast<std::byte*>(output.data);
  const bool in_place =
      rank() == root && input.data == out + static_cast<std::size_t>(root) * block;
  run_watched(call, "MPI_Gather", [&] {
    return MPI_Gather(in_place ? MPI_IN_PLACE : input.data, static_cast<int>(block), MPI_BYTE, out,
                      static_cast<int>(block), MPI_BYTE, root, comm_);
  });
}

void MpiTransport::do_scatter(ConstElementSpan input, ElementSpan output, int root) {
  check_usable("scatter");
  p2p_->reap_sends();
  const CollectiveCall call =
      next_call(CollectiveKind::scatter, ReduceOp::sum, output.dtype, output.count, root);
  agree_on_rooted(call);
  const std::size_t block = output.bytes();
  if (block > options_.max_message_bytes) {
    throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                          "each rank's block exceeds what one MPI call can carry",
                          "split the scatter into several calls");
  }
  const auto* in = static_cast<const std::byte*>(input.data);
  const bool in_place =
      rank() == root && output.data == in + static_cast<std::size_t>(root) * block;
  run_watched(call, "MPI_Scatter", [&] {
    return MPI_Scatter(in, static_cast<int>(block), MPI_BYTE, in_place ? MPI_IN_PLACE : output.data,
                       static_cast<int>(block), MPI_BYTE, root, comm_);
  });
}

void MpiTransport::do_broadcast(ElementSpan data, int root) {
  check_usable("broadcast");
  p2p_->reap_sends();
  const CollectiveCall call =
      next_call(CollectiveKind::broadcast, ReduceOp::sum, data.dtype, data.count, root);
  agree_on_rooted(call);
  auto* bytes = static_cast<std::byte*>(data.data);
  for (std::size_t offset = 0; offset < data.bytes(); offset += options_.max_message_bytes) {
    const auto piece =
        static_cast<int>(std::min(options_.max_message_bytes, data.bytes() - offset));
    run_watched(call, "MPI_Bcast",
                [&] { return MPI_Bcast(bytes + offset, piece, MPI_BYTE, root, comm_); });
  }
}

void MpiTransport::do_all_to_all(ConstElementSpan input, ElementSpan output) {
  check_usable("all_to_all");
  p2p_->reap_sends();
  const std::size_t block_count = input.count / static_cast<std::size_t>(world_size());
  const CollectiveCall call =
      next_call(CollectiveKind::all_to_all, ReduceOp::sum, input.dtype, block_count);
  agreement_.prepare(call, 0);
  agree_on(call);
  const std::size_t block = block_count * size_of(input.dtype);
  const bool in_place = input.data == output.data;
  auto* out = static_cast<std::byte*>(output.data);
  const auto* in = static_cast<const std::byte*>(input.data);
  if (block <= options_.max_message_bytes) {
    const auto bytes = static_cast<int>(block);
    run_watched(call, "MPI_Alltoall", [&] {
      return MPI_Alltoall(in_place ? MPI_IN_PLACE : in, bytes, MPI_BYTE, out, bytes, MPI_BYTE,
                          comm_);
    });
    return;
  }
  // Piece `offset` of every block at once: one strided datatype per piece.
  for (std::size_t offset = 0; offset < block; offset += options_.max_message_bytes) {
    const StridedBytes piece(std::min(options_.max_message_bytes, block - offset), block);
    if (piece.code() != MPI_SUCCESS) {
      throw mpi_error(piece.code(), site(call.describe()), "MPI_Type_create_resized");
    }
    run_watched(call, "MPI_Alltoall", [&] {
      return MPI_Alltoall(in_place ? MPI_IN_PLACE : in + offset, 1, piece.get(), out + offset, 1,
                          piece.get(), comm_);
    });
  }
}

}  // namespace rlx::mpi
