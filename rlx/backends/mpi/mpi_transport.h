// The Open MPI transport: rlx over a private duplicate of MPI_COMM_WORLD, so
// rlx's messages never match the program's own MPI traffic.
//
// Threads and lifetime: rlx/backends/mpi/runtime.h (MPI_THREAD_MULTIPLE; MPI is
// finalised once, at exit, only when rlx started it). Element types and
// operations: datatypes.h. Point-to-point: point_to_point.h.
//
// Collectives: every call first agrees with the other ranks on what they
// all call (call_agreement.h: one MPI_Allreduce of a 64-bit cell, which
// carries 4-byte calls whole), so a mismatch fails every rank with
// ErrorKind::mismatch before any data moves; calls that agree then run MPI's
// blocking MPI_Allreduce (in place), MPI_Allgather,
// MPI_Reduce_scatter_block, MPI_Bcast and MPI_Alltoall, and a barrier is the
// agreement alone. Calls over
// max_message_bytes go in pieces, so MPI's int counts never overflow. Each
// MPI call runs under a watchdog (watchdog.h): a blocking MPI call cannot be
// interrupted, so when one has not returned after timeout() the watchdog
// names the ranks that do not answer a probe, prints the rlx error and calls
// MPI_Abort. Why blocking calls rather than polled non-blocking ones, and
// what the agreement costs: docs/BENCHMARKS.md, "The MPI transport beside
// MPI_Allreduce".
//
// Errors: the communicator returns errors (MPI_ERRORS_RETURN); every failed
// MPI call becomes a CollectiveError with MPI's error string, recorded in the
// failure latch (failure.h) when it leaves MPI state behind.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <mpi.h>

#include "rlx/backends/mpi/call_agreement.h"
#include "rlx/backends/mpi/point_to_point.h"
#include "rlx/backends/mpi/runtime.h"
#include "rlx/backends/mpi/watchdog.h"
#include "rlx/collectives/algorithm_table.h"
#include "rlx/transport/collective_call.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/transport.h"

namespace rlx::mpi {

struct MpiOptions {
  // The largest single MPI message: larger point-to-point payloads go in
  // parts and larger collectives in pieces. Tests lower it to exercise the
  // splitting without gigabytes of memory; at least 64.
  std::size_t max_message_bytes = std::size_t{1} << 30;
};

class MpiTransport final : public Transport, private Releasable {
 public:
  // Starts MPI if needed and joins a duplicate of MPI_COMM_WORLD: a collective
  // call, made by every rank in the same order. Throws CollectiveError.
  explicit MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options = {});
  // The same over a duplicate of `base` (a communicator split() made).
  MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options, MPI_Comm base);
  ~MpiTransport() override;

 protected:
  void do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) override;
  std::vector<std::byte> do_recv_bytes(int from, Tag tag) override;
  std::optional<std::size_t> do_try_recv_bytes_into(int from, Tag tag, std::span<std::byte> into,
                                                    std::size_t element) override;
  void do_all_reduce(ElementSpan data, ReduceOp op) override;
  void do_all_gather(ConstElementSpan input, ElementSpan output) override;
  void do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) override;
  void do_broadcast(ElementSpan data, int root) override;
  void do_all_to_all(ConstElementSpan input, ElementSpan output) override;
  void do_reduce(ElementSpan data, ReduceOp op, int root) override;
  void do_gather(ConstElementSpan input, ElementSpan output, int root) override;
  void do_scatter(ConstElementSpan input, ElementSpan output, int root) override;
  void do_all_gather_v(ConstElementSpan input, ElementSpan output,
                       std::span<const std::size_t> counts) override;
  void do_all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                       ElementSpan output, std::span<const std::size_t> recv_counts) override;
  void do_barrier() override;
  std::shared_ptr<Transport> do_split(const SplitPlan& plan) override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Position {
    int rank;
    int world_size;
  };
  MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options, Position position,
               MPI_Comm base);
  static Position join_world(const launch_env::LaunchEnv& env);
  static Position position_in(MPI_Comm comm);

  void release_for_finalize() override;
  void release();

  // Throws, naming `operation`, when an earlier failure made the transport unusable.
  void check_usable(std::string_view operation) const;
  // Records `error` as the transport's failure and returns it.
  CollectiveError break_with(CollectiveError error);
  [[noreturn]] void abort_on_deadline(const WatchedCall& call, std::chrono::milliseconds waited);
  // Liveness, on the watchdog's thread, over probe_comm_: a rank stuck in a
  // collective for half its deadline answers pings; one whose deadline
  // passed pings every other rank, and those that do not answer within
  // `patience` are stopped, hung, or not inside an rlx collective: the
  // likely cause, which the timeout names.
  void answer_probes();
  std::vector<int> silent_peers(std::chrono::milliseconds patience);

  // Runs the cell prepared for `call` through MPI_Allreduce (call_agreement.h)
  // and throws ErrorKind::mismatch, on every rank, unless every rank made it.
  void agree_on(const CollectiveCall& call);
  // The same for a rooted call: the cell carries count x world_size + root.
  void agree_on_rooted(const CollectiveCall& call);
  CollectiveError mismatch_error(const CollectiveCall& call,
                                 const CallAgreement::Verdict& verdict) const;
  // One MPI_Allreduce of at most max_message_bytes, under the watchdog.
  void all_reduce_piece(void* data, std::size_t count, MPI_Datatype type, MPI_Op op,
                        const CollectiveCall& call);
  void all_gather_in_pieces(const void* send, std::byte* output, std::size_t per_rank,
                            const CollectiveCall& call);
  // counts_int_ and displacements_ for `counts` (elements), or
  // invalid_argument when they do not fit MPI's ints.
  void prepare_displacements(std::span<const std::size_t> counts, const CollectiveCall& call);
  // Runs `mpi_call` (returning MPI's code) under the watchdog; a failure
  // breaks the transport and throws, naming `name`.
  template <class MpiCall>
  void run_watched(const CollectiveCall& call, const char* name, MpiCall&& mpi_call) {
    int code = MPI_SUCCESS;
    {
      WatchedScope watch(watchdog_, {.call = call});
      code = mpi_call();
    }
    if (code != MPI_SUCCESS) [[unlikely]] {
      throw break_with(mpi_error(code, site(call.describe()), name));
    }
  }

  const launch_env::LaunchEnv env_;  // for the groups split() makes
  const MpiOptions options_;
  std::array<std::size_t, std::size(kAllDtypes)> piece_elements_{};  // [dtype]: elements per call
  Watchdog watchdog_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<MPI_Comm> probe_comm_{MPI_COMM_NULL};  // set once the transport is up
  CallAgreement agreement_;
  ChoiceLog choices_;                            // what the debug log said
  std::vector<int> counts_int_, displacements_;  // the _v collectives', reused

  FailureLatch latch_;
  std::unique_ptr<PointToPoint> p2p_;  // set once the communicator exists

  std::mutex release_mutex_;
  bool released_ = false;
};

}  // namespace rlx::mpi
