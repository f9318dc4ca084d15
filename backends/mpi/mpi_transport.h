// The Open MPI transport: rlx over a private duplicate of MPI_COMM_WORLD, so
// rlx's messages never match the program's own MPI traffic.
//
// Threads and lifetime: see backends/mpi/runtime.h (MPI_THREAD_MULTIPLE;
// MPI is finalised once, at exit, only when rlx started it).
//
// Collectives: every call first agrees with the other ranks on what they
// all call (backends/mpi/call_agreement.h: one MPI_Allreduce of a 64-bit
// cell, which carries 4-byte calls whole), so a mismatch fails every rank
// with ErrorKind::mismatch before any data moves; calls that agree then run
// MPI's blocking MPI_Allreduce (in place), MPI_Allgather and
// MPI_Reduce_scatter_block, and a barrier is the agreement alone. Each MPI
// call runs under a watchdog (backends/mpi/watchdog.h): when it has not
// returned after timeout(), the watchdog prints the rlx error (kind timeout,
// naming the rank and the call) to stderr and calls MPI_Abort, because a
// blocking MPI call cannot be interrupted. Polling MPI_Iallreduce instead,
// which could throw, costs about twice MPI_Allreduce's time on one host
// (docs/BENCHMARKS.md, "The MPI transport beside MPI_Allreduce", has the
// figures of both; tests/mpi/mpi_overhead_bench.cc measures them).
//
// Element types: f32/f64 map to MPI's types and ops; i32/i64 sums and
// products go through MPI's unsigned types (wrap-around of two's complement
// integers is the wrap-around of the unsigned type, which MPI computes with
// unsigned C arithmetic, where it is defined), min and max use the signed
// types; bool is MPI_C_BOOL with MPI_LOR (sum, max) or MPI_LAND (prod, min);
// f16 and bf16 use user-defined commutative ops over MPI_UINT16_T that widen
// to float, combine with reduce_into and round back; u8 sums and products use
// such an op too, because Open MPI 4.1's AVX kernels saturate 8-bit sums
// instead of wrapping (open-mpi/ompi#8045, closed as wontfix). Calls over
// more than max_message_bytes are cut into pieces, so MPI's int counts never
// overflow (all_gather pieces use a strided datatype to land in each rank's block).
//
// Point-to-point: send_bytes copies the payload, MPI_Isends the copy and keeps
// request and buffer in a pending list reaped by later calls and drained (up
// to timeout()) on destruction, so it never waits for the receiver. While
// sends are pending a progress thread also reaps them every millisecond or
// so: over TCP, Open MPI moves a long message only while the sender is inside
// an MPI call, and a sender busy computing would otherwise hold up its receiver.
// recv_bytes polls MPI_Improbe (matched probe, so concurrent receivers cannot
// take each other's message) with a backoff until timeout(), then receives
// with MPI_Imrecv. User tag t is MPI tag t; every message carries one trailing
// byte saying whether it is the whole payload or the header of a payload sent
// in parts (more than max_message_bytes, 1 GiB by default): the header holds
// the total and part sizes and the parts follow with MPI tag t | kPartTagBit,
// which no user receive matches. Parts of one message are sent back to back
// under one lock and received under one lock, so FIFO per (peer, tag) holds.
//
// Errors: the communicator returns errors (MPI_ERRORS_RETURN); every failed
// MPI call becomes a CollectiveError with MPI's error string. A receive that
// times out before a message matched leaves the transport usable; one that
// times out after matching (the data never finished arriving) cannot be
// cancelled, and makes every later call fail with that error.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "backends/mpi/call_agreement.h"
#include "backends/mpi/runtime.h"
#include "backends/mpi/watchdog.h"
#include "collectives/links.h"
#include "transport/launch_env.h"
#include "transport/transport.h"

namespace rlx::mpi {

struct MpiOptions {
  // The largest single MPI message: larger point-to-point payloads go in
  // parts and larger collectives in pieces. Tests lower it to exercise the
  // splitting without gigabytes of memory; at least 64.
  std::size_t max_message_bytes = std::size_t{1} << 30;
};

// MPI tags with this bit carry the parts of a long message (user tags are below it).
inline constexpr int kPartTagBit = 1 << 24;

class MpiTransport final : public Transport, private Releasable {
 public:
  // Starts MPI if needed and joins a duplicate of MPI_COMM_WORLD: a collective
  // call, made by every rank in the same order. Throws CollectiveError.
  explicit MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options = {});
  ~MpiTransport() override;

 protected:
  void do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) override;
  std::vector<std::byte> do_recv_bytes(int from, Tag tag) override;
  void do_all_reduce(ElementSpan data, ReduceOp op) override;
  void do_all_gather(ConstElementSpan input, ElementSpan output) override;
  void do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) override;
  void do_barrier() override;

 private:
  using Clock = std::chrono::steady_clock;
  struct Position {
    int rank;
    int world_size;
  };
  struct PendingSend {
    int to;
    Tag tag;
    std::vector<std::byte> buffer;
    std::vector<MPI_Request> requests;
  };

  MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options, Position position);
  static Position join_world(const launch_env::LaunchEnv& env);

  void release_for_finalize() override;
  void release();
  void drain_sends(Clock::time_point deadline);

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

  void reap_sends();
  void progress_sends();
  void stop_progress();
  void post_sends(PendingSend& pending, std::size_t payload_bytes);
  // Waits for `request` until `deadline`; false when it passed first.
  bool wait(MPI_Request& request, MPI_Status& status, Clock::time_point deadline,
            const ErrorSite& where);
  // Receives the message MPI_Improbe matched; `lock` is probe_mutex_'s.
  std::vector<std::byte> receive_matched(MPI_Message& message, const MPI_Status& status, int from,
                                         Tag tag, Clock::time_point deadline,
                                         std::unique_lock<std::mutex>& lock);
  std::vector<std::byte> receive_parts(std::span<const std::byte> header, int from, Tag tag,
                                       Clock::time_point deadline, const ErrorSite& where);
  // The next collective's signature (every rank numbers its calls alike).
  CollectiveCall next_call(CollectiveKind kind, ReduceOp op, Dtype dtype, std::uint64_t count);
  // Runs the cell prepared for `call` through MPI_Allreduce (call_agreement.h)
  // and throws ErrorKind::mismatch, on every rank, unless every rank made it.
  void agree_on(const CollectiveCall& call);
  CollectiveError mismatch_error(const CollectiveCall& call,
                                 const CallAgreement::Verdict& verdict) const;
  // One MPI_Allreduce of at most max_message_bytes, under the watchdog.
  void all_reduce_piece(void* data, std::size_t count, MPI_Datatype type, MPI_Op op,
                        const CollectiveCall& call);
  void all_gather_in_pieces(const void* send, std::byte* output, std::size_t per_rank,
                            const CollectiveCall& call);

  const MpiOptions options_;
  std::array<std::size_t, std::size(kAllDtypes)> piece_elements_{};  // [dtype]: elements per call
  Watchdog watchdog_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::atomic<MPI_Comm> probe_comm_{MPI_COMM_NULL};  // set once the transport is up
  CallAgreement agreement_;
  std::uint64_t sequence_ = 0;  // collectives run so far

  std::mutex send_mutex_;  // pending_ and the order of a message's parts
  std::list<PendingSend> pending_;
  std::atomic<std::size_t> pending_count_{0};
  std::mutex probe_mutex_;

  std::mutex progress_mutex_;
  std::condition_variable progress_wake_;
  std::atomic<bool> progress_stopping_{false};
  std::thread progress_;  // held from matching a long message's header to its last part

  std::atomic<bool> broken_{false};
  mutable std::mutex failure_mutex_;
  std::optional<CollectiveError> failure_;

  std::mutex release_mutex_;
  bool released_ = false;
};

}  // namespace rlx::mpi
