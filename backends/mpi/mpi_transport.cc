#include "backends/mpi/mpi_transport.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/mpi/backoff.h"
#include "backends/mpi/mpi.h"
#include "transport/log.h"

namespace rlx::mpi {
namespace {

// The last byte of every message says what the bytes before it are.
constexpr std::byte kWhole{0};  // the whole payload
constexpr std::byte kParts{1};  // a header: total and part sizes (2 x u64); the parts follow
constexpr std::size_t kHeaderBytes = 2 * sizeof(std::uint64_t);

struct Reduction {
  MPI_Datatype type;
  MPI_Op op;
};

MPI_Op native_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::prod:
      return MPI_PROD;
    case ReduceOp::min:
      return MPI_MIN;
    case ReduceOp::max:
      break;
  }
  return MPI_MAX;
}

// The MPI datatype and operation that compute `op` over `dtype` as rlx defines it.
Reduction reduction_for(Dtype dtype, ReduceOp op) {
  const bool wraps = op == ReduceOp::sum || op == ReduceOp::prod;
  switch (dtype) {
    case Dtype::f32:
      return {MPI_FLOAT, native_op(op)};
    case Dtype::f64:
      return {MPI_DOUBLE, native_op(op)};
    case Dtype::i32:
      return {wraps ? MPI_UINT32_T : MPI_INT32_T, native_op(op)};
    case Dtype::i64:
      return {wraps ? MPI_UINT64_T : MPI_INT64_T, native_op(op)};
    case Dtype::u8:
      // Open MPI's AVX kernels saturate 8-bit sums (open-mpi/ompi#8045, "wontfix").
      return {MPI_UINT8_T, wraps ? kernel_op(dtype, op) : native_op(op)};
    case Dtype::f16:
    case Dtype::bf16:
      return {MPI_UINT16_T, kernel_op(dtype, op)};
    case Dtype::boolean:
      break;
  }
  return {MPI_C_BOOL, op == ReduceOp::sum || op == ReduceOp::max ? MPI_LOR : MPI_LAND};
}

// Keeps buffers that MPI may still write into or read from (a receive that
// timed out after it matched, sends nobody received) for the rest of the
// process: freeing them could corrupt whatever reuses the memory.
void abandon(std::vector<std::byte> buffer) {
  static auto* mutex = new std::mutex;
  static auto* kept = new std::vector<std::vector<std::byte>>;
  std::lock_guard lock(*mutex);
  kept->push_back(std::move(buffer));
}

// A committed datatype of `bytes` contiguous bytes whose extent is `extent`,
// so that block r of an all_gather lands at r * extent.
class StridedBytes {
 public:
  StridedBytes(std::size_t bytes, std::size_t extent) {
    MPI_Datatype contiguous = MPI_DATATYPE_NULL;
    code_ = MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &contiguous);
    if (code_ != MPI_SUCCESS) return;
    code_ = MPI_Type_create_resized(contiguous, 0, static_cast<MPI_Aint>(extent), &type_);
    MPI_Type_free(&contiguous);
    if (code_ == MPI_SUCCESS) code_ = MPI_Type_commit(&type_);
  }
  ~StridedBytes() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  StridedBytes(const StridedBytes&) = delete;
  StridedBytes& operator=(const StridedBytes&) = delete;

  int code() const { return code_; }
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  int code_ = MPI_SUCCESS;
};

std::string tag_and_size(Tag tag, std::size_t bytes) {
  return "tag " + std::to_string(tag) + ", " + format_bytes(bytes);
}

std::string_view mpi_call_of(const WatchedCall& watched) {
  if (watched.setup) return "MPI_Comm_dup";
  switch (watched.call.kind) {
    case CollectiveKind::all_gather:
      return "MPI_Allgather";
    case CollectiveKind::reduce_scatter:
      return "MPI_Reduce_scatter_block";
    case CollectiveKind::all_reduce:
    case CollectiveKind::barrier:
    case CollectiveKind::broadcast:
      break;
  }
  return "MPI_Allreduce";
}

}  // namespace

MpiTransport::MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options)
    : MpiTransport(env, options, join_world(env)) {}

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

MpiTransport::MpiTransport(const launch_env::LaunchEnv& env, MpiOptions options, Position position)
    : Transport(position.rank, position.world_size, "mpi", env.timeout),
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
  for (Dtype dtype : kAllDtypes) {
    piece_elements_[static_cast<std::size_t>(dtype)] = options_.max_message_bytes / size_of(dtype);
  }
  if (agreement_.creation_code() != MPI_SUCCESS) {
    throw mpi_error(agreement_.creation_code(), site("init mpi"), "creating the call agreement");
  }
  int code = MPI_SUCCESS;
  {
    WatchedScope watch(watchdog_, {.setup = true});
    code = MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
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
  progress_ = std::thread([this] { progress_sends(); });
  register_live(this);
}

MpiTransport::~MpiTransport() {
  // When the finalize hook took this transport, it has released it already.
  if (unregister(this)) release();
  stop_progress();
  watchdog_.stop();
}

void MpiTransport::release_for_finalize() {
  break_with(CollectiveError(ErrorKind::backend_unavailable, site("finalize"),
                             "MPI has been finalised; the transport is closed"));
  release();
}

void MpiTransport::release() {
  std::lock_guard lock(release_mutex_);
  if (released_) return;
  released_ = true;
  watchdog_.stop();
  stop_progress();
  drain_sends(Clock::now() + timeout());
  agreement_.release();
  MPI_Comm probe = probe_comm_.exchange(MPI_COMM_NULL);
  if (probe != MPI_COMM_NULL) MPI_Comm_free(&probe);
  MPI_Comm_free(&comm_);
}

void MpiTransport::drain_sends(Clock::time_point deadline) {
  Backoff backoff;
  try {
    while (pending_count_.load(std::memory_order_acquire) > 0 && Clock::now() < deadline) {
      reap_sends();
      backoff.pause();
    }
  } catch (const CollectiveError& error) {
    log_warning(error.what());
  }
  std::lock_guard lock(send_mutex_);
  if (pending_.empty()) return;
  std::string peers;
  for (PendingSend& pending : pending_) {
    peers += " " + std::to_string(pending.to) + ":" + std::to_string(pending.tag);
    for (MPI_Request& request : pending.requests) {
      if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
    }
    abandon(std::move(pending.buffer));
  }
  log_warning("rank " + std::to_string(rank()) + ": " + std::to_string(pending_.size()) +
              " message(s) sent with send_bytes were not received within " +
              std::to_string(timeout().count()) + " ms of closing the transport; dropped " +
              "(rank:tag)" + peers);
  pending_.clear();
  pending_count_.store(0, std::memory_order_release);
}

void MpiTransport::check_usable(std::string_view operation) const {
  if (!broken_.load(std::memory_order_acquire)) [[likely]]
    return;
  std::lock_guard lock(failure_mutex_);
  throw CollectiveError(
      failure_->kind(), site(operation),
      std::string("the transport is unusable after an earlier failure: ") + failure_->what());
}

CollectiveError MpiTransport::break_with(CollectiveError error) {
  std::lock_guard lock(failure_mutex_);
  if (!failure_) {
    failure_ = error;
    broken_.store(true, std::memory_order_release);
  }
  return error;
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

void MpiTransport::reap_sends() {
  if (pending_count_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(send_mutex_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    int done = 0;
    const int code = MPI_Testall(static_cast<int>(it->requests.size()), it->requests.data(), &done,
                                 MPI_STATUSES_IGNORE);
    if (code != MPI_SUCCESS) {
      throw break_with(mpi_error(
          code, site("send_bytes", it->to, tag_and_size(it->tag, it->buffer.size())), "MPI_Isend"));
    }
    it = done ? pending_.erase(it) : std::next(it);
  }
  pending_count_.store(pending_.size(), std::memory_order_release);
}

void MpiTransport::progress_sends() {
  constexpr auto kFirstSleep = std::chrono::microseconds(20);
  constexpr auto kLongestSleep = std::chrono::microseconds(1000);
  std::unique_lock lock(progress_mutex_);
  for (;;) {
    progress_wake_.wait(lock, [this] {
      return progress_stopping_.load() || pending_count_.load(std::memory_order_acquire) > 0;
    });
    if (progress_stopping_.load()) return;
    lock.unlock();
    auto sleep = kFirstSleep;
    while (!progress_stopping_.load() && pending_count_.load(std::memory_order_acquire) > 0) {
      try {
        reap_sends();
      } catch (const CollectiveError&) {
        return;  // recorded: every later call reports it
      }
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, kLongestSleep);
    }
    lock.lock();
  }
}

void MpiTransport::stop_progress() {
  {
    std::lock_guard lock(progress_mutex_);
    progress_stopping_.store(true);
  }
  progress_wake_.notify_all();
  if (progress_.joinable()) progress_.join();
}

void MpiTransport::do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) {
  check_usable("send_bytes");
  reap_sends();
  const bool whole = payload.size() < options_.max_message_bytes;
  std::vector<std::byte> buffer;
  buffer.reserve(payload.size() + (whole ? 1 : kHeaderBytes + 1));
  buffer.assign(payload.begin(), payload.end());
  if (!whole) {
    const std::uint64_t sizes[2] = {payload.size(), options_.max_message_bytes};
    const auto* header = reinterpret_cast<const std::byte*>(sizes);
    buffer.insert(buffer.end(), header, header + kHeaderBytes);
  }
  buffer.push_back(whole ? kWhole : kParts);

  bool first_pending = false;
  {
    std::lock_guard lock(send_mutex_);
    // Listed before posting, so the buffer outlives every request even if a post fails.
    PendingSend& pending = pending_.emplace_back(PendingSend{to, tag, std::move(buffer), {}});
    first_pending = pending_.size() == 1;
    pending_count_.store(pending_.size(), std::memory_order_release);
    post_sends(pending, payload.size());
  }
  if (first_pending) {
    // Taking the lock orders this wake-up after the thread's check of pending_count_.
    { std::lock_guard lock(progress_mutex_); }
    progress_wake_.notify_one();
  }
}

void MpiTransport::post_sends(PendingSend& pending, std::size_t payload_bytes) {
  const auto fail = [&](int code) {
    return break_with(
        mpi_error(code, site("send_bytes", pending.to, tag_and_size(pending.tag, payload_bytes)),
                  "MPI_Isend"));
  };
  std::byte* data = pending.buffer.data();
  const bool whole = pending.buffer.size() == payload_bytes + 1;
  const std::size_t first_offset = whole ? 0 : payload_bytes;
  pending.requests.push_back(MPI_REQUEST_NULL);
  int code = MPI_Isend(data + first_offset, static_cast<int>(pending.buffer.size() - first_offset),
                       MPI_BYTE, pending.to, static_cast<int>(pending.tag), comm_,
                       &pending.requests.back());
  if (code != MPI_SUCCESS) throw fail(code);
  if (whole) return;
  const int part_tag = static_cast<int>(pending.tag) | kPartTagBit;
  for (std::size_t offset = 0; offset < payload_bytes; offset += options_.max_message_bytes) {
    const std::size_t bytes = std::min(options_.max_message_bytes, payload_bytes - offset);
    pending.requests.push_back(MPI_REQUEST_NULL);
    code = MPI_Isend(data + offset, static_cast<int>(bytes), MPI_BYTE, pending.to, part_tag, comm_,
                     &pending.requests.back());
    if (code != MPI_SUCCESS) throw fail(code);
  }
}

std::vector<std::byte> MpiTransport::do_recv_bytes(int from, Tag tag) {
  check_usable("recv_bytes");
  reap_sends();
  const auto deadline = Clock::now() + timeout();
  Backoff backoff;
  for (;;) {
    // Polled, not a timed lock: the holder may be taking a long message's
    // parts, and this loop already backs off and checks the deadline.
    std::unique_lock lock(probe_mutex_, std::try_to_lock);
    if (lock.owns_lock()) {
      int found = 0;
      MPI_Message message = MPI_MESSAGE_NULL;
      MPI_Status status;
      const int code = MPI_Improbe(from, static_cast<int>(tag), comm_, &found, &message, &status);
      if (code != MPI_SUCCESS) {
        throw break_with(
            mpi_error(code, site("recv_bytes", from, "tag " + std::to_string(tag)), "MPI_Improbe"));
      }
      if (found) return receive_matched(message, status, from, tag, deadline, lock);
      lock.unlock();
    }
    if (Clock::now() >= deadline) break;
    backoff.pause();
    check_usable("recv_bytes");
  }
  throw CollectiveError(ErrorKind::timeout, site("recv_bytes", from, "tag " + std::to_string(tag)),
                        "no message arrived within " + std::to_string(timeout().count()) + " ms",
                        "does rank " + std::to_string(from) + " send with this tag?");
}

std::vector<std::byte> MpiTransport::receive_matched(MPI_Message& message, const MPI_Status& status,
                                                     int from, Tag tag, Clock::time_point deadline,
                                                     std::unique_lock<std::mutex>& lock) {
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  count = std::max(count, 0);
  const ErrorSite where = site("recv_bytes", from, "tag " + std::to_string(tag));
  // Only a header keeps the lock: its parts must be taken before anyone
  // matches the next message from this peer and tag.
  if (count != static_cast<int>(kHeaderBytes + 1)) lock.unlock();
  std::vector<std::byte> data(count > 0 ? static_cast<std::size_t>(count) : 1);
  MPI_Request request = MPI_REQUEST_NULL;
  const int code = MPI_Imrecv(data.data(), count, MPI_BYTE, &message, &request);
  if (code != MPI_SUCCESS) throw break_with(mpi_error(code, where, "MPI_Imrecv"));
  MPI_Status received;
  if (!wait(request, received, deadline, where)) {
    MPI_Request_free(&request);
    abandon(std::move(data));
    throw break_with(CollectiveError(ErrorKind::timeout, where,
                                     "a " + format_bytes(static_cast<std::size_t>(count)) +
                                         " message matched but did not finish arriving within " +
                                         std::to_string(timeout().count()) + " ms",
                                     "is rank " + std::to_string(from) + " still running?"));
  }
  if (count < 1) {
    throw break_with(CollectiveError(ErrorKind::protocol_violation, where,
                                     "an empty MPI message arrived",
                                     "does another program use rlx's communicator?"));
  }
  const std::byte kind = data.back();
  data.pop_back();
  if (kind == kWhole) return data;
  if (kind != kParts || data.size() != kHeaderBytes) {
    throw break_with(CollectiveError(ErrorKind::protocol_violation, where,
                                     "a message ends with an unknown kind byte"));
  }
  return receive_parts(data, from, tag, deadline, where);
}

std::vector<std::byte> MpiTransport::receive_parts(std::span<const std::byte> header, int from,
                                                   Tag tag, Clock::time_point deadline,
                                                   const ErrorSite& where) {
  std::uint64_t sizes[2] = {};
  std::memcpy(sizes, header.data(), kHeaderBytes);
  const std::uint64_t total = sizes[0];
  const std::uint64_t part = sizes[1];
  if (part == 0 || part > INT_MAX) {
    throw break_with(CollectiveError(
        ErrorKind::protocol_violation, where,
        "a long message's header names parts of " + std::to_string(part) + " bytes"));
  }
  std::vector<std::byte> data(total);
  const int part_tag = static_cast<int>(tag) | kPartTagBit;
  for (std::size_t offset = 0; offset < total; offset += part) {
    const auto bytes = static_cast<int>(std::min<std::uint64_t>(part, total - offset));
    MPI_Request request = MPI_REQUEST_NULL;
    const int code =
        MPI_Irecv(data.data() + offset, bytes, MPI_BYTE, from, part_tag, comm_, &request);
    if (code != MPI_SUCCESS) throw break_with(mpi_error(code, where, "MPI_Irecv"));
    MPI_Status status;
    if (!wait(request, status, deadline, where)) {
      MPI_Request_free(&request);
      abandon(std::move(data));
      throw break_with(CollectiveError(
          ErrorKind::timeout, where,
          "a " + format_bytes(total) + " message sent in parts did not finish arriving within " +
              std::to_string(timeout().count()) + " ms",
          "is rank " + std::to_string(from) + " still running?"));
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count != bytes) {
      throw break_with(CollectiveError(ErrorKind::protocol_violation, where,
                                       "a part of " + std::to_string(count) + " bytes arrived, " +
                                           std::to_string(bytes) + " were expected"));
    }
  }
  return data;
}

bool MpiTransport::wait(MPI_Request& request, MPI_Status& status, Clock::time_point deadline,
                        const ErrorSite& where) {
  Backoff backoff;
  for (;;) {
    int done = 0;
    const int code = MPI_Test(&request, &done, &status);
    if (code != MPI_SUCCESS) throw break_with(mpi_error(code, where, "MPI_Test"));
    if (done) return true;
    if (Clock::now() >= deadline) return false;
    backoff.pause();
  }
}

CollectiveCall MpiTransport::next_call(CollectiveKind kind, ReduceOp op, Dtype dtype,
                                       std::uint64_t count) {
  return {.kind = kind, .op = op, .dtype = dtype, .count = count, .sequence = sequence_++};
}

void MpiTransport::agree_on(const CollectiveCall& call) {
  if (call.count >= CallAgreement::kCountLimit) [[unlikely]] {
    throw CollectiveError(ErrorKind::invalid_argument, site(call.describe()),
                          "the MPI transport takes at most 2^54 elements per call");
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
  return CollectiveError(ErrorKind::mismatch, site(call.describe(), other_rank),
                         "this rank called " + call.describe() + " but rank " +
                             std::to_string(other_rank) + " called " + other.describe(),
                         "every rank must call the same collectives in the same order with the "
                         "same sizes");
}

void MpiTransport::do_all_reduce(ElementSpan data, ReduceOp op) {
  check_usable("all_reduce");
  reap_sends();
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
  reap_sends();
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
  reap_sends();
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
  reap_sends();
  const CollectiveCall call = next_call(CollectiveKind::barrier, ReduceOp::sum, Dtype::u8, 0);
  agreement_.prepare(call, 0);
  agree_on(call);
}

bool is_built() { return true; }

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env) {
  return std::make_shared<MpiTransport>(env);
}

}  // namespace rlx::mpi
