// The MPI transport's send_bytes and recv_bytes over its private
// communicator.
//
// send copies the payload, MPI_Isends the copy and keeps request and buffer
// in a pending list reaped by later calls and drained (up to the timeout) on
// close, so it never waits for the receiver. While sends are pending a
// progress thread also reaps them every millisecond or so: over TCP, Open MPI
// moves a long message only while the sender is inside an MPI call, and a
// sender busy computing would otherwise hold up its receiver.
//
// receive polls MPI_Improbe (matched probe, so concurrent receivers cannot
// take each other's message) with a backoff until the timeout, then receives
// with MPI_Imrecv. User tag t is MPI tag t; every message carries one
// trailing byte saying whether it is the whole payload or the header of a
// payload sent in parts (more than max_message_bytes): the header holds the
// total and part sizes and the parts follow with MPI tag t | kPartTagBit,
// which no user receive matches. Parts of one message are sent back to back
// under one lock and received under one lock, so FIFO per (peer, tag) holds.
//
// A receive that times out before a message matched leaves the transport
// usable; one that times out after matching (the data never finished
// arriving) cannot be cancelled, and trips the failure latch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "rlx/transport/errors.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/transport.h"

namespace rlx::mpi {

// MPI tags with this bit carry the parts of a long message (user tags are below it).
inline constexpr int kPartTagBit = 1 << 24;

class PointToPoint {
 public:
  using Clock = std::chrono::steady_clock;
  struct Spec {
    int rank = 0;
    int world_size = 1;
    std::chrono::milliseconds timeout{0};
    std::size_t max_message_bytes = 0;  // larger payloads go in parts
  };

  // Starts the progress thread. `comm` must outlive close().
  PointToPoint(MPI_Comm comm, Spec spec, FailureLatch& latch);
  ~PointToPoint();
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;

  void send(int to, Tag tag, std::span<const std::byte> payload);
  std::vector<std::byte> receive(int from, Tag tag);
  // The same without waiting for a message MPI has not matched yet: nullopt
  // when none is there.
  std::optional<std::vector<std::byte>> try_receive(int from, Tag tag);
  // Completes the sends MPI finished; throws (and trips the latch) on a failed one.
  void reap_sends();
  // Stops the progress thread, waits until `deadline` for pending sends, and
  // drops the rest with a warning naming them.
  void close(Clock::time_point deadline);

 private:
  struct PendingSend {
    int to;
    Tag tag;
    std::vector<std::byte> buffer;
    std::vector<MPI_Request> requests;
  };

  ErrorSite site(std::string_view operation, int peer, std::string sizes) const;
  CollectiveError broken(CollectiveError error);
  void post_sends(PendingSend& pending, std::size_t payload_bytes);
  void progress_sends();
  void stop_progress();
  void drain_sends(Clock::time_point deadline);
  // Waits for `request` until `deadline`; false when it passed first.
  bool wait(MPI_Request& request, MPI_Status& status, Clock::time_point deadline,
            const ErrorSite& where);
  // One MPI_Improbe for a message from `from` with `tag`, received (until
  // `deadline`) when it matched; nullopt when none did, or another receiver
  // holds the probe.
  std::optional<std::vector<std::byte>> probe_and_receive(int from, Tag tag,
                                                          Clock::time_point deadline);
  // Receives the message MPI_Improbe matched; `lock` is probe_mutex_'s.
  std::vector<std::byte> receive_matched(MPI_Message& message, const MPI_Status& status, int from,
                                         Tag tag, Clock::time_point deadline,
                                         std::unique_lock<std::mutex>& lock);
  std::vector<std::byte> receive_parts(std::span<const std::byte> header, int from, Tag tag,
                                       Clock::time_point deadline, const ErrorSite& where);

  const MPI_Comm comm_;
  const Spec spec_;
  FailureLatch& latch_;

  std::mutex send_mutex_;  // pending_ and the order of a message's parts
  std::list<PendingSend> pending_;
  std::atomic<std::size_t> pending_count_{0};
  std::mutex probe_mutex_;  // held from matching a long message's header to its last part

  std::mutex progress_mutex_;
  std::condition_variable progress_wake_;
  std::atomic<bool> progress_stopping_{false};
  std::thread progress_;
};

}  // namespace rlx::mpi
