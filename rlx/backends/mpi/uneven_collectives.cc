// MpiTransport's all_gather_v and all_to_all_v. MPI does not check that
// ranks agree on the counts (a disagreement is MPI_ERR_TRUNCATE on some
// ranks and garbage on others), so after the call agreement each runs one
// more small collective that makes every rank fail with mismatch instead:
// all_gather_v compares every rank's counts (one all-reduce of the counts
// and their negations with MPI_MAX); all_to_all_v sends each rank what the
// others will send it (MPI_Alltoall of the send counts) and agrees on
// whether any receive count differed (MPI_Allreduce).
#include <climits>
#include <vector>

#include "rlx/backends/mpi/datatypes.h"
#include "rlx/backends/mpi/mpi_transport.h"

namespace rlx::mpi {

void MpiTransport::prepare_displacements(std::span<const std::size_t> counts,
                                         const CollectiveCall& call) {
  const auto n = counts.size();
  counts_int_.resize(n);
  displacements_.resize(n);
  std::size_t offset = 0;
  for (std::size_t r = 0; r < n; ++r) {
    if (counts[r] > INT_MAX || offset > INT_MAX) {
      throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                            "counts or offsets above 2^31 - 1 elements do not fit one MPI call",
                            "split the call into several");
    }
    counts_int_[r] = static_cast<int>(counts[r]);
    displacements_[r] = static_cast<int>(offset);
    offset += counts[r];
  }
}

void MpiTransport::do_all_gather_v(ConstElementSpan input, ElementSpan output,
                                   std::span<const std::size_t> counts) {
  check_usable("all_gather_v");
  p2p_->reap_sends();
  const CollectiveCall call =
      next_call(CollectiveKind::all_gather_v, ReduceOp::sum, output.dtype, output.count);
  agreement_.prepare(call, 0);
  agree_on(call);
  // The same counts on every rank: the maximum of each count and of its
  // negation (minus the minimum) agree exactly when every rank's agree.
  const std::size_t n = counts.size();
  std::vector<std::int64_t> bounds(2 * n);
  for (std::size_t r = 0; r < n; ++r) {
    bounds[r] = static_cast<std::int64_t>(counts[r]);
    bounds[n + r] = -static_cast<std::int64_t>(counts[r]);
  }
  run_watched(call, "MPI_Allreduce", [&] {
    return MPI_Allreduce(MPI_IN_PLACE, bounds.data(), static_cast<int>(2 * n), MPI_INT64_T, MPI_MAX,
                         comm_);
  });
  for (std::size_t r = 0; r < n; ++r) {
    if (bounds[r] != -bounds[n + r]) {
      throw break_with(CollectiveError(
          ErrorKind::mismatch, site(call.describe()),
          "ranks passed different counts: rank " + std::to_string(r) + "'s count is " +
              std::to_string(-bounds[n + r]) + " on some ranks and " + std::to_string(bounds[r]) +
              " on others (this rank: " + std::to_string(counts[r]) + ")",
          "every rank must pass the same counts to all_gather_v"));
    }
  }
  prepare_displacements(counts, call);
  const MPI_Datatype type = reduction_for(output.dtype, ReduceOp::max).type;
  const std::size_t element = size_of(output.dtype);
  auto* out = static_cast<std::byte*>(output.data);
  const auto* own =
      out + static_cast<std::size_t>(displacements_[static_cast<std::size_t>(rank())]) * element;
  const void* send = input.data == own ? MPI_IN_PLACE : input.data;
  run_watched(call, "MPI_Allgatherv", [&] {
    return MPI_Allgatherv(send, static_cast<int>(input.count), type, out, counts_int_.data(),
                          displacements_.data(), type, comm_);
  });
}

void MpiTransport::do_all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                                   ElementSpan output, std::span<const std::size_t> recv_counts) {
  check_usable("all_to_all_v");
  p2p_->reap_sends();
  const CollectiveCall call =
      next_call(CollectiveKind::all_to_all_v, ReduceOp::sum, input.dtype, 0);
  agreement_.prepare(call, 0);
  agree_on(call);
  const std::size_t n = send_counts.size();
  std::vector<std::uint64_t> sending(send_counts.begin(), send_counts.end()), coming(n);
  run_watched(call, "MPI_Alltoall", [&] {
    return MPI_Alltoall(sending.data(), 1, MPI_UINT64_T, coming.data(), 1, MPI_UINT64_T, comm_);
  });
  int first_wrong = -1;
  for (std::size_t r = 0; r < n && first_wrong < 0; ++r) {
    if (coming[r] != recv_counts[r]) first_wrong = static_cast<int>(r);
  }
  int finder = first_wrong < 0 ? 0 : rank() + 1;
  run_watched(call, "MPI_Allreduce",
              [&] { return MPI_Allreduce(MPI_IN_PLACE, &finder, 1, MPI_INT, MPI_MAX, comm_); });
  if (first_wrong >= 0) {
    const auto r = static_cast<std::size_t>(first_wrong);
    throw break_with(
        CollectiveError(ErrorKind::mismatch, site(call.describe(), first_wrong),
                        "rank " + std::to_string(r) + " sends this rank " +
                            std::to_string(coming[r]) + " elements but this rank's recv_counts[" +
                            std::to_string(r) + "] is " + std::to_string(recv_counts[r]),
                        "send_counts[j] on rank i must be recv_counts[i] on rank j"));
  }
  if (finder > 0) {
    throw break_with(CollectiveError(
        ErrorKind::mismatch, site(call.describe(), finder - 1),
        "rank " + std::to_string(finder - 1) +
            " expects other counts than its peers send it (its own error names them)",
        "send_counts[j] on rank i must be recv_counts[i] on rank j"));
  }
  prepare_displacements(send_counts, call);
  std::vector<int> send_sizes = counts_int_, send_offsets = displacements_;
  prepare_displacements(recv_counts, call);
  const MPI_Datatype type = reduction_for(input.dtype, ReduceOp::max).type;
  run_watched(call, "MPI_Alltoallv", [&] {
    return MPI_Alltoallv(input.data, send_sizes.data(), send_offsets.data(), type, output.data,
                         counts_int_.data(), displacements_.data(), type, comm_);
  });
}

}  // namespace rlx::mpi
