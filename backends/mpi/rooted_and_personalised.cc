// MpiTransport's broadcast and all-to-all: agreement first, as every
// collective, then MPI_Bcast and MPI_Alltoall, in pieces of at most
// max_message_bytes so MPI's int counts never overflow.
#include <algorithm>
#include <climits>

#include "backends/mpi/datatypes.h"
#include "backends/mpi/mpi_transport.h"

namespace rlx::mpi {

void MpiTransport::do_broadcast(ElementSpan data, int root) {
  check_usable("broadcast");
  p2p_->reap_sends();
  CollectiveCall call = next_call(CollectiveKind::broadcast, ReduceOp::sum, data.dtype, data.count);
  call.root = root;
  // The cell has room for a count, not a root: it carries count x n + root,
  // one number per (count, root), so ranks that disagree on either differ.
  const auto n = static_cast<std::uint64_t>(world_size());
  std::uint64_t key = 0;
  if (__builtin_mul_overflow(call.count, n, &key) || key + n >= CallAgreement::kCountLimit) {
    throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                          "the MPI transport broadcasts at most 2^54 / world_size elements",
                          "split the broadcast into several calls");
  }
  CollectiveCall signature = call;
  signature.count = key + static_cast<std::uint64_t>(root);
  agreement_.prepare(signature, 0);
  agree_on(call);
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
