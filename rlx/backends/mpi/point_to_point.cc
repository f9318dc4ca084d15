#include "rlx/backends/mpi/point_to_point.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>

#include "rlx/backends/mpi/backoff.h"
#include "rlx/backends/mpi/failure.h"
#include "rlx/backends/mpi/runtime.h"
#include "rlx/transport/log.h"

namespace rlx::mpi {
namespace {

// The last byte of every message says what the bytes before it are.
constexpr std::byte kWhole{0};  // the whole payload
constexpr std::byte kParts{1};  // a header: total and part sizes (2 x u64); the parts follow
constexpr std::size_t kHeaderBytes = 2 * sizeof(std::uint64_t);

// Keeps buffers that MPI may still write into or read from (a receive that
// timed out after it matched, sends nobody received) for the rest of the
// process: freeing them could corrupt whatever reuses the memory.
void abandon(std::vector<std::byte> buffer) {
  static auto* mutex = new std::mutex;
  static auto* kept = new std::vector<std::vector<std::byte>>;
  std::lock_guard lock(*mutex);
  kept->push_back(std::move(buffer));
}

std::string tag_and_size(Tag tag, std::size_t bytes) {
  return "tag " + std::to_string(tag) + ", " + format_bytes(bytes);
}

}  // namespace

PointToPoint::PointToPoint(MPI_Comm comm, Spec spec, FailureLatch& latch)
    : comm_(comm), spec_(spec), latch_(latch), progress_([this] { progress_sends(); }) {}

PointToPoint::~PointToPoint() { stop_progress(); }

void PointToPoint::close(Clock::time_point deadline) {
  stop_progress();
  drain_sends(deadline);
}

ErrorSite PointToPoint::site(std::string_view operation, int peer, std::string sizes) const {
  return {.rank = spec_.rank,
          .world_size = spec_.world_size,
          .peer = peer,
          .operation = std::string(operation),
          .sizes = std::move(sizes)};
}

CollectiveError PointToPoint::broken(CollectiveError error) {
  return record_failure(latch_, std::move(error));
}

void PointToPoint::reap_sends() {
  if (pending_count_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(send_mutex_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    int done = 0;
    const int code = MPI_Testall(static_cast<int>(it->requests.size()), it->requests.data(), &done,
                                 MPI_STATUSES_IGNORE);
    if (code != MPI_SUCCESS) {
      throw broken(mpi_error(
          code, site("send_bytes", it->to, tag_and_size(it->tag, it->buffer.size())), "MPI_Isend"));
    }
    it = done ? pending_.erase(it) : std::next(it);
  }
  pending_count_.store(pending_.size(), std::memory_order_release);
}

void PointToPoint::progress_sends() {
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

void PointToPoint::stop_progress() {
  {
    std::lock_guard lock(progress_mutex_);
    progress_stopping_.store(true);
  }
  progress_wake_.notify_all();
  if (progress_.joinable()) progress_.join();
}

void PointToPoint::send(int to, Tag tag, std::span<const std::byte> payload) {
  const bool whole = payload.size() < spec_.max_message_bytes;
  std::vector<std::byte> buffer;
  buffer.reserve(payload.size() + (whole ? 1 : kHeaderBytes + 1));
  buffer.assign(payload.begin(), payload.end());
  if (!whole) {
    const std::uint64_t sizes[2] = {payload.size(), spec_.max_message_bytes};
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

void PointToPoint::post_sends(PendingSend& pending, std::size_t payload_bytes) {
  const auto fail = [&](int code) {
    return broken(
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
  for (std::size_t offset = 0; offset < payload_bytes; offset += spec_.max_message_bytes) {
    const std::size_t bytes = std::min(spec_.max_message_bytes, payload_bytes - offset);
    pending.requests.push_back(MPI_REQUEST_NULL);
    code = MPI_Isend(data + offset, static_cast<int>(bytes), MPI_BYTE, pending.to, part_tag, comm_,
                     &pending.requests.back());
    if (code != MPI_SUCCESS) throw fail(code);
  }
}

std::vector<std::byte> PointToPoint::receive(int from, Tag tag) {
  const auto deadline = Clock::now() + spec_.timeout;
  Backoff backoff;
  for (;;) {
    if (auto message = probe_and_receive(from, tag, deadline)) return std::move(*message);
    if (Clock::now() >= deadline) break;
    backoff.pause();
    if (latch_.tripped())
      throw_if_unusable(latch_, site("recv_bytes", from, "tag " + std::to_string(tag)));
  }
  throw CollectiveError(
      ErrorKind::timeout, site("recv_bytes", from, "tag " + std::to_string(tag)),
      "no message arrived within " + std::to_string(spec_.timeout.count()) + " ms",
      "does rank " + std::to_string(from) + " send with this tag?");
}

std::optional<std::vector<std::byte>> PointToPoint::try_receive(int from, Tag tag) {
  auto message = probe_and_receive(from, tag, Clock::now() + spec_.timeout);
  if (!message && latch_.tripped())
    throw_if_unusable(latch_, site("recv_bytes", from, "tag " + std::to_string(tag)));
  return message;
}

std::optional<std::vector<std::byte>> PointToPoint::probe_and_receive(int from, Tag tag,
                                                                      Clock::time_point deadline) {
  // Polled, not a timed lock: the holder may be taking a long message's
  // parts, and the callers back off and check the deadline.
  std::unique_lock lock(probe_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  int found = 0;
  MPI_Message message = MPI_MESSAGE_NULL;
  MPI_Status status;
  const int code = MPI_Improbe(from, static_cast<int>(tag), comm_, &found, &message, &status);
  if (code != MPI_SUCCESS) {
    throw broken(
        mpi_error(code, site("recv_bytes", from, "tag " + std::to_string(tag)), "MPI_Improbe"));
  }
  if (!found) return std::nullopt;
  return receive_matched(message, status, from, tag, deadline, lock);
}

std::vector<std::byte> PointToPoint::receive_matched(MPI_Message& message, const MPI_Status& status,
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
  if (code != MPI_SUCCESS) throw broken(mpi_error(code, where, "MPI_Imrecv"));
  MPI_Status received;
  if (!wait(request, received, deadline, where)) {
    MPI_Request_free(&request);
    abandon(std::move(data));
    throw broken(CollectiveError(ErrorKind::timeout, where,
                                 "a " + format_bytes(static_cast<std::size_t>(count)) +
                                     " message matched but did not finish arriving within " +
                                     std::to_string(spec_.timeout.count()) + " ms",
                                 "is rank " + std::to_string(from) + " still running?"));
  }
  if (count < 1) {
    throw broken(CollectiveError(ErrorKind::protocol_violation, where,
                                 "an empty MPI message arrived",
                                 "does another program use rlx's communicator?"));
  }
  const std::byte kind = data.back();
  data.pop_back();
  if (kind == kWhole) return data;
  if (kind != kParts || data.size() != kHeaderBytes) {
    throw broken(CollectiveError(ErrorKind::protocol_violation, where,
                                 "a message ends with an unknown kind byte"));
  }
  return receive_parts(data, from, tag, deadline, where);
}

std::vector<std::byte> PointToPoint::receive_parts(std::span<const std::byte> header, int from,
                                                   Tag tag, Clock::time_point deadline,
                                                   const ErrorSite& where) {
  std::uint64_t sizes[2] = {};
  std::memcpy(sizes, header.data(), kHeaderBytes);
  const std::uint64_t total = sizes[0];
  const std::uint64_t part = sizes[1];
  if (part == 0 || part > INT_MAX) {
    throw broken(CollectiveError(
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
    if (code != MPI_SUCCESS) throw broken(mpi_error(code, where, "MPI_Irecv"));
    MPI_Status status;
    if (!wait(request, status, deadline, where)) {
      MPI_Request_free(&request);
      abandon(std::move(data));
      throw broken(CollectiveError(ErrorKind::timeout, where,
                                   "a " + format_bytes(total) +
                                       " message sent in parts did not finish arriving within " +
                                       std::to_string(spec_.timeout.count()) + " ms",
                                   "is rank " + std::to_string(from) + " still running?"));
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count != bytes) {
      throw broken(CollectiveError(ErrorKind::protocol_violation, where,
                                   "a part of " + std::to_string(count) + " bytes arrived, " +
                                       std::to_string(bytes) + " were expected"));
    }
  }
  return data;
}

bool PointToPoint::wait(MPI_Request& request, MPI_Status& status, Clock::time_point deadline,
                        const ErrorSite& where) {
  Backoff backoff;
  for (;;) {
    int done = 0;
    const int code = MPI_Test(&request, &done, &status);
    if (code != MPI_SUCCESS) throw broken(mpi_error(code, where, "MPI_Test"));
    if (done) return true;
    if (Clock::now() >= deadline) return false;
    backoff.pause();
  }
}

void PointToPoint::drain_sends(Clock::time_point deadline) {
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
  log_warning("rank " + std::to_string(spec_.rank) + ": " + std::to_string(pending_.size()) +
              " message(s) sent with send_bytes were not received within " +
              std::to_string(spec_.timeout.count()) + " ms of closing the transport; dropped " +
              "(rank:tag)" + peers);
  pending_.clear();
  pending_count_.store(0, std::memory_order_release);
}

}  // namespace rlx::mpi
