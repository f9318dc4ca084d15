#include "rlx/backends/mpi/mpi_transport.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rlx/backends/mpi/datatypes.h"
#include "rlx/backends/mpi/failure.h"
#include "rlx/backends/mpi/mpi.h"
#include "rlx/collectives/algorithm_table.h"
#include "rlx/transport/call_record.h"
#include "rlx/transport/log.h"

namespace rlx::mpi {
namespace {

std::string_view mpi_call_of(const WatchedCall& watched) {
  if (watched.setup) return "MPI_Comm_dup";
  switch (watched.call.kind) {
    case CollectiveKind::all_gather:
      return "MPI_Allgather";
    case CollectiveKind::reduce_scatter:
      return "MPI_Reduce_scatter_block";
    case CollectiveKind::broadcast:
      return "MPI_Bcast";
    case CollectiveKind::all_to_all:
      return "MPI_Alltoall";
    case CollectiveKind::all_gather_v:
      return "MPI_Allgatherv";
    case CollectiveKind::reduce:
      return "MPI_Reduce";
    case CollectiveKind::gather:
      return "MPI_Gather";
    case CollectiveKind::scatter:
      return "MPI_Scatter";
    case CollectiveKind::all_to_all_v:
      return "MPI_Alltoallv";
    case CollectiveKind::all_reduce:
    case CollectiveKind::barrier:
      break;
  }
  return "MPI_Allreduce";
}

}  // namespace

MpiTransport::MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options)
    : MpiTransport(env, options, join_world(env), MPI_COMM_WORLD) {}

MpiTransport::MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options, MPI_Comm base)
    : MpiTransport(env, options, position_in(base), base) {}

MpiTransport::Position MpiTransport::position_in(MPI_Comm comm) {
  Position position{};
  MPI_Comm_rank(comm, &position.rank);
  MPI_Comm_size(comm, &position.world_size);
  return position;
}

MpiTransport::Position MpiTransport::join_world(const launch_env::LaunchEnv& env) {
  const ErrorSite where{.rank = env.mpi_rank.value_or(-1),
                        .world_size = env.mpi_world_size.value_or(-1),
                        .operation = "init mpi"};
  ensure_started(where);
  Position position{};
  MPI_Comm_rank(MPI_COMM_WORLD, &position.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &position.world_size);
  if ((env.mpi_rank && *env.mpi_rank != position.rank) ||
      (env.mpi_world_size && *env.mpi_world_size != position.world_size)) {
    throw CollectiveError(
        ErrorKind::backend_unavailable, where,
        "OMPI_COMM_WORLD_RANK/SIZE say rank " + std::to_string(env.mpi_rank.value_or(-1)) + " of " +
            std::to_string(env.mpi_world_size.value_or(-1)) + " but MPI_COMM_WORLD has rank " +
            std::to_string(position.rank) + " of " + std::to_string(position.world_size),
        "start the program with Open MPI's own mpirun");
  }
  void* tag_ub = nullptr;
  int found = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found);
  const int largest_tag = found ? *static_cast<int*>(tag_ub) : 32767;
  if (largest_tag < (kPartTagBit | static_cast<int>(kMaxTag))) {
    throw CollectiveError(ErrorKind::backend_unavailable, where,
                          "this MPI's largest tag is " + std::to_string(largest_tag) +
                              "; rlx needs " + std::to_string(kPartTagBit | kMaxTag),
                          "use Open MPI");
  }
  return position;
}

MpiTransport::MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options, Position position,
                           MPI_Comm base)
    : Transport(position.rank, position.world_size, "mpi", env.timeout),
      env_(env),
      options_(options),
      watchdog_(
          env.timeout,
          [this](const WatchedCall& call, std::chrono::milliseconds waited) {
            abort_on_deadline(call, waited);
          },
          [this] { answer_probes(); }) {
  if (options_.max_message_bytes < 64 || options_.max_message_bytes > INT_MAX) {
    throw CollectiveError(ErrorKind::invalid_argument, site("init mpi"),
                          "max_message_bytes is " + std::to_string(options_.max_message_bytes) +
                              "; it must be within 64..INT_MAX");
  }
  if (!env.tune.empty()) {
    throw CollectiveError(ErrorKind::invalid_argument, site("init mpi"),
                          "RLX_TUNE='" + env.tune.front().text +
                              "...' chooses rlx's algorithms, but the MPI backend runs Open MPI's",
                          "unset RLX_TUNE under mpirun (Open MPI's own are tuned with "
                          "OMPI_MCA_coll_tuned_* settings), or run rlx's algorithms with "
                          "RLX_BACKEND=tcp");
  }
  for (Dtype dtype : kAllDtypes) {
    piece_elements_[static_cast<std::size_t>(dtype)] = options_.max_message_bytes / size_of(dtype);
  }
  if (agreement_.creation_code() != MPI_SUCCESS) {
    throw mpi_error(agreement_.creation_code(), site("init mpi"), "creating the call agreement");
  }
  int code = MPI_SUCCESS;
  {
    WatchedScope watch(watchdog_, {.setup = true});
    code = MPI_Comm_dup(base, &comm_);
  }
  if (code != MPI_SUCCESS) throw mpi_error(code, site("init mpi"), "MPI_Comm_dup");
  code = MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  if (code == MPI_SUCCESS) code = MPI_Comm_set_name(comm_, "rlx");
  MPI_Comm probe = MPI_COMM_NULL;
  if (code == MPI_SUCCESS) {
    WatchedScope watch(watchdog_, {.setup = true});
    code = MPI_Comm_dup(comm_, &probe);
  }
  if (code == MPI_SUCCESS) code = MPI_Comm_set_errhandler(probe, MPI_ERRORS_RETURN);
  if (code != MPI_SUCCESS) {
    if (probe != MPI_COMM_NULL) MPI_Comm_free(&probe);
    MPI_Comm_free(&comm_);
    throw mpi_error(code, site("init mpi"), "MPI_Comm_set_errhandler");
  }
  probe_comm_.store(probe);
  p2p_ = std::make_unique<PointToPoint>(
      comm_,
      PointToPoint::Spec{.rank = rank(),
                         .world_size = world_size(),
                         .timeout = timeout(),
                         .max_message_bytes = options_.max_message_bytes},
      latch_);
  register_live(this);
}

MpiTransport::~MpiTransport() {
  stop_background_work();
  // When the finalize hook took this transport, it has released it already.
  if (unregister(this)) release();
  p2p_.reset();
  watchdog_.stop();
}

void MpiTransport::release_for_finalize() {
  stop_background_work();
  break_with(CollectiveError(ErrorKind::backend_unavailable, site("finalize"),
                             "MPI has been finalised; the transport is closed"));
  release();
}

void MpiTransport::release() {
  std::lock_guard lock(release_mutex_);
  if (released_) return;
  released_ = true;
  watchdog_.stop();
  if (p2p_) p2p_->close(Clock::now() + timeout());
  agreement_.release();
  MPI_Comm probe = probe_comm_.exchange(MPI_COMM_NULL);
  if (probe != MPI_COMM_NULL) MPI_Comm_free(&probe);
  MPI_Comm_free(&comm_);
}

void MpiTransport::abort_on_deadline(const WatchedCall& watched, std::chrono::milliseconds waited) {
  const std::vector<int> silent =
      watched.setup ? std::vector<int>{} : silent_peers(std::chrono::milliseconds(1000));
  std::string ranks;
  for (int peer : silent) ranks += (ranks.empty() ? "" : ", ") + std::to_string(peer);
  const std::string cause =
      silent.empty() ? ""
                     : "; rank" + std::string(silent.size() > 1 ? "s " : " ") + ranks +
                           (silent.size() > 1 ? " do" : " does") +
                           " not answer (stopped, hung, or not inside an rlx collective): the "
                           "likely cause";
  const int peer = silent.size() == 1 ? silent.front() : -1;
  const CollectiveError error(
      ErrorKind::timeout, watched.setup ? site("init mpi") : site(watched.call.describe(), peer),
      std::string(mpi_call_of(watched)) + " has not returned after " +
          std::to_string(waited.count()) + " ms (the deadline is " +
          std::to_string(timeout().count()) +
          " ms); a blocking MPI call cannot be interrupted, so rlx aborts the job" + cause,
      "is a rank stuck or dead, or did it stop calling collectives? RLX_TIMEOUT_S sets the "
      "deadline");
  const std::string line = std::string(error.what()) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; if it ever did, the job must still end
}

namespace {
constexpr int kPingTag = 1;
constexpr int kPongTag = 2;
}  // namespace

void MpiTransport::answer_probes() {
  const MPI_Comm probe = probe_comm_.load();
  if (probe == MPI_COMM_NULL) return;
  for (;;) {
    int found = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kPingTag, probe, &found, &status) != MPI_SUCCESS || !found) {
      return;
    }
    MPI_Recv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, kPingTag, probe, MPI_STATUS_IGNORE);
    MPI_Request pong = MPI_REQUEST_NULL;
    MPI_Isend(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, kPongTag, probe, &pong);
    MPI_Request_free(&pong);  // an empty message: nothing to keep alive
  }
}

std::vector<int> MpiTransport::silent_peers(std::chrono::milliseconds patience) {
  const MPI_Comm probe = probe_comm_.load();
  if (probe == MPI_COMM_NULL) return {};
  std::vector<bool> answered(static_cast<std::size_t>(world_size()), false);
  answered[static_cast<std::size_t>(rank())] = true;
  for (int peer = 0; peer < world_size(); ++peer) {
    if (peer == rank()) continue;
    MPI_Request ping = MPI_REQUEST_NULL;
    MPI_Isend(nullptr, 0, MPI_BYTE, peer, kPingTag, probe, &ping);
    MPI_Request_free(&ping);
  }
  const auto deadline = Clock::now() + patience;
  while (Clock::now() < deadline &&
         std::find(answered.begin(), answered.end(), false) != answered.end()) {
    answer_probes();  // the others time out about now too, and ask us
    int found = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kPongTag, probe, &found, &status);
    if (found) {
      MPI_Recv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, kPongTag, probe, MPI_STATUS_IGNORE);
      answered[static_cast<std::size_t>(status.MPI_SOURCE)] = true;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::vector<int> silent;
  for (int peer = 0; peer < world_size(); ++peer) {
    if (!answered[static_cast<std::size_t>(peer)]) silent.push_back(peer);
  }
  return silent;
}

void MpiTransport::check_usable(std::string_view operation) const {
  // Checked first: building the site on every call costs a 4-byte call ~5%.
  if (latch_.tripped()) [[unlikely]]
    throw_if_unusable(latch_, site(operation));
}

CollectiveError MpiTransport::break_with(CollectiveError error) {
  return record_failure(latch_, std::move(error));
}

void MpiTransport::do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) {
  check_usable("send_bytes");
  p2p_->reap_sends();
  p2p_->send(to, tag, payload);
}

std::vector<std::byte> MpiTransport::do_recv_bytes(int from, Tag tag) {
  check_usable("recv_bytes");
  p2p_->reap_sends();
  return p2p_->receive(from, tag);
}

std::optional<std::size_t> MpiTransport::do_try_recv_bytes_into(int from, Tag tag,
                                                                std::span<std::byte> into,
                                                                std::size_t element) {
  check_usable("recv_bytes");
  p2p_->reap_sends();
  auto message = p2p_->try_receive(from, tag);
  if (!message) return std::nullopt;
  return place_or_keep(from, tag, std::move(*message), into, element);
}

void MpiTransport::agree_on(const CollectiveCall& call) {
  CallRecord::process().note_choice("open_mpi", "mpi");
  if (log_enabled(LogLevel::debug)) {
    log_choice(choices_, call, call.count * size_of(call.dtype), "open_mpi", "mpi",
               "Open MPI's own " + std::string(name_of(call.kind)) +
                   " (its coll framework chooses the algorithm)");
  }
  if (call.count >= CallAgreement::kCountLimit) [[unlikely]] {
    throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                          "the MPI transport takes at most 2^53 elements per call");
  }
  int code = MPI_SUCCESS;
  {
    WatchedScope watch(watchdog_, {.call = call});
    code = MPI_Allreduce(MPI_IN_PLACE, agreement_.cell(), 1, MPI_UINT64_T, agreement_.cell_op(),
                         comm_);
  }
  if (code != MPI_SUCCESS) [[unlikely]] {
    throw break_with(mpi_error(code, site(call.describe()), "MPI_Allreduce"));
  }
  if (agreement_.agreed()) [[likely]]
    return;
  // Every rank saw the disagreement: together they find out who called what.
  agreement_.prepare_diagnosis(call, rank());
  {
    WatchedScope watch(watchdog_, {.call = call});
    code = MPI_Allreduce(MPI_IN_PLACE, agreement_.diagnosis(), 1, agreement_.diagnosis_datatype(),
                         agreement_.diagnosis_op(), comm_);
  }
  if (code != MPI_SUCCESS) {
    throw break_with(mpi_error(code, site(call.describe()), "MPI_Allreduce"));
  }
  throw break_with(mismatch_error(call, agreement_.verdict()));
}

CollectiveError MpiTransport::mismatch_error(const CollectiveCall& call,
                                             const CallAgreement::Verdict& verdict) const {
  const bool mine_is_least = verdict.least == call;
  const CollectiveCall& other = mine_is_least ? verdict.greatest : verdict.least;
  const int other_rank = mine_is_least ? verdict.greatest_rank : verdict.least_rank;
  return call_mismatch(site(call.describe()), call, other_rank, other);
}

void MpiTransport::do_all_reduce(ElementSpan data, ReduceOp op) {
  check_usable("all_reduce");
  p2p_->reap_sends();
  const CollectiveCall call = next_call(CollectiveKind::all_reduce, op, data.dtype, data.count);
  const std::size_t bytes = data.bytes();
  const bool inline_data = bytes <= CallAgreement::kInlineBytes;
  std::span<std::byte> cell_data = agreement_.prepare(call, inline_data ? data.count : 0);
  if (inline_data) [[likely]] {
    if (bytes > 0) std::memcpy(cell_data.data(), data.data, bytes);
    agree_on(call);
    if (bytes > 0) std::memcpy(data.data, cell_data.data(), bytes);
    return;
  }
  agree_on(call);
  const Reduction reduction = reduction_for(data.dtype, op);
  const std::size_t piece = piece_elements_[static_cast<std::size_t>(data.dtype)];
  const std::size_t element = size_of(data.dtype);
  auto* elements = static_cast<std::byte*>(data.data);
  for (std::size_t done = 0; done < data.count; done += piece) {
    all_reduce_piece(elements + done * element, std::min(piece, data.count - done), reduction.type,
                     reduction.op, call);
  }
}

void MpiTransport::all_reduce_piece(void* data, std::size_t count, MPI_Datatype type, MPI_Op op,
                                    const CollectiveCall& call) {
  int code = MPI_SUCCESS;
  {
    WatchedScope watch(watchdog_, {.call = call});
    code = MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, op, comm_);
  }
  if (code != MPI_SUCCESS) [[unlikely]] {
    throw break_with(mpi_error(code, site(call.describe()), "MPI_Allreduce"));
  }
}

void MpiTransport::do_all_gather(ConstElementSpan input, ElementSpan output) {
  check_usable("all_gather");
  p2p_->reap_sends();
  const CollectiveCall call =
      next_call(CollectiveKind::all_gather, ReduceOp::sum, input.dtype, input.count);
  const std::size_t per_rank = input.bytes();
  auto* out = static_cast<std::byte*>(output.data);
  if (output.bytes() <= CallAgreement::kInlineBytes) {
    // Every rank's block is zero but its own, so or-ing the cells gathers them.
    std::span<std::byte> cell_data = agreement_.prepare(call, output.count);
    std::fill(cell_data.begin(), cell_data.end(), std::byte{0});
    if (per_rank > 0) {
      std::memmove(cell_data.data() + static_cast<std::size_t>(rank()) * per_rank, input.data,
                   per_rank);
    }
    agree_on(call);
    if (per_rank > 0) std::memcpy(out, cell_data.data(), output.bytes());
    return;
  }
  agreement_.prepare(call, 0);
  agree_on(call);
  // Each rank's block of the output is where MPI_IN_PLACE expects its input.
  const bool in_place = input.data == out + static_cast<std::size_t>(rank()) * per_rank;
  const void* send = in_place ? MPI_IN_PLACE : input.data;
  if (per_rank > options_.max_message_bytes) {
    all_gather_in_pieces(send, out, per_rank, call);
    return;
  }
  int code = MPI_SUCCESS;
  {
    WatchedScope watch(watchdog_, {.call = call});
    code = MPI_Allgather(send, static_cast<int>(per_rank), MPI_BYTE, out,
                         static_cast<int>(per_rank), MPI_BYTE, comm_);
  }
  if (code != MPI_SUCCESS) [[unlikely]] {
    throw break_with(mpi_error(code, site(call.describe()), "MPI_Allgather"));
  }
}

void MpiTransport::do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) {
  check_usable("reduce_scatter");
  p2p_->reap_sends();
  const CollectiveCall call =
      next_call(CollectiveKind::reduce_scatter, op, output.dtype, output.count);
  if (input.bytes() <= CallAgreement::kInlineBytes) {
    // The whole input is reduced in the cell; this rank keeps its block.
    std::span<std::byte> cell_data = agreement_.prepare(call, input.count);
    if (input.bytes() > 0) std::memcpy(cell_data.data(), input.data, input.bytes());
    agree_on(call);
    if (output.bytes() > 0) {
      std::memmove(output.data,
                   cell_data.data() + static_cast<std::size_t>(rank()) * output.bytes(),
                   output.bytes());
    }
    return;
  }
  agreement_.prepare(call, 0);
  agree_on(call);
  if (output.count > piece_elements_[static_cast<std::size_t>(output.dtype)]) {
    // MPI counts are ints: a block this large would need strided pieces.
    throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                          "each rank's block exceeds what one MPI call can carry",
                          "split the reduce_scatter into several calls");
  }
  const Reduction reduction = reduction_for(output.dtype, op);
  int code = MPI_SUCCESS;
  {
    WatchedScope watch(watchdog_, {.call = call});
    code = MPI_Reduce_scatter_block(input.data, output.data, static_cast<int>(output.count),
                                    reduction.type, reduction.op, comm_);
  }
  if (code != MPI_SUCCESS) [[unlikely]] {
    throw break_with(mpi_error(code, site(call.describe()), "MPI_Reduce_scatter_block"));
  }
}

void MpiTransport::all_gather_in_pieces(const void* send, std::byte* output, std::size_t per_rank,
                                        const CollectiveCall& call) {
  const ErrorSite where = site(call.describe());
  for (std::size_t offset = 0; offset < per_rank; offset += options_.max_message_bytes) {
    const std::size_t bytes = std::min(options_.max_message_bytes, per_rank - offset);
    // Piece `offset` of rank r's block goes to output + r * per_rank + offset.
    const StridedBytes block(bytes, per_rank);
    if (block.code() != MPI_SUCCESS)
      throw mpi_error(block.code(), where, "MPI_Type_create_resized");
    const void* piece =
        send == MPI_IN_PLACE ? MPI_IN_PLACE : static_cast<const std::byte*>(send) + offset;
    int code = MPI_SUCCESS;
    {
      WatchedScope watch(watchdog_, {.call = call});
      code = MPI_Allgather(piece, static_cast<int>(bytes), MPI_BYTE, output + offset, 1,
                           block.get(), comm_);
    }
    if (code != MPI_SUCCESS) throw break_with(mpi_error(code, where, "MPI_Allgather"));
  }
}

void MpiTransport::do_barrier() {
  check_usable("barrier");
  p2p_->reap_sends();
  const CollectiveCall call = next_call(CollectiveKind::barrier, ReduceOp::sum, Dtype::u8, 0);
  agreement_.prepare(call, 0);
  agree_on(call);
}

std::shared_ptr<Transport> MpiTransport::do_split(const SplitPlan& plan) {
  check_usable("split");
  MPI_Comm part = MPI_COMM_NULL;
  int code = MPI_SUCCESS;
  {
    WatchedScope watch(watchdog_, {.setup = true});
    // Keys are the new ranks split() computed: MPI orders the group alike.
    code = MPI_Comm_split(comm_, plan.rank < 0 ? MPI_UNDEFINED : plan.color, plan.rank, &part);
  }
  if (code != MPI_SUCCESS) throw break_with(mpi_error(code, site("split"), "MPI_Comm_split"));
  if (part == MPI_COMM_NULL) return nullptr;
  std::shared_ptr<Transport> child;
  try {
    child = std::make_shared<MpiTransport>(env_, options_, part);
  } catch (...) {
    MPI_Comm_free(&part);
    throw;
  }
  MPI_Comm_free(&part);
  return child;
}

bool is_built() { return true; }

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env) {
  return std::make_shared<MpiTransport>(env);
}

}  // namespace rlx::mpi
