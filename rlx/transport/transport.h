// The transport interface every backend implements, and what users call.
//
// A Transport is one process's membership in a group of `world_size()` ranks.
// It offers framed point-to-point messages and the collectives. The public
// methods validate their arguments and handle the trivial one-rank group once,
// for every backend; a backend implements the protected do_* hooks.
//
// Semantics shared by every backend:
//  * send_bytes returns without waiting for the peer's recv_bytes, so a ring
//    of ranks that all send before they receive never deadlocks;
//  * messages between a pair of ranks with the same tag arrive in FIFO order;
//    different tags are independent (a receive may pick any tag first);
//  * collectives are called in the same order, with the same sizes, by every
//    rank; a mismatch is reported as ErrorKind::mismatch where it is detected;
//  * every blocking call has a deadline (timeout(), from RLX_TIMEOUT_S) and
//    ends in a CollectiveError instead of waiting forever.
// A Transport may be shared between threads, but collectives on one transport
// must not run concurrently (issue them from one thread, as async_eval does):
// a collective entered while another is running on the same transport fails
// at once with invalid_argument, before any data moves, and the running one
// and the group are unaffected.
//
// Every argument is checked here, for every backend, before anything is sent:
// null buffers with a non-zero length, element counts whose byte size does
// not fit in size_t, Dtype and ReduceOp values outside their enums. A bad call
// throws invalid_argument and leaves the group usable.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "rlx/core/dtype.h"
#include "rlx/transport/call_record.h"
#include "rlx/transport/collective_stream.h"
#include "rlx/transport/errors.h"
#include "rlx/transport/point_to_point_stream.h"
#include "rlx/transport/posted_receives.h"
#include "rlx/transport/request.h"

namespace rlx {

enum class ReduceOp : std::uint8_t { sum, prod, min, max };
enum class CollectiveKind : std::uint8_t;  // collective_call.h
struct CollectiveCall;
std::string_view name_of(ReduceOp op);

// Elements of one dtype that a collective reads.
struct ConstElementSpan {
  const void* data = nullptr;
  std::size_t count = 0;
  Dtype dtype = Dtype::f32;

  std::size_t bytes() const { return count * size_of(dtype); }
  template <Element T>
  static ConstElementSpan of(std::span<const T> values) {
    return {values.data(), values.size(), dtype_of<T>};
  }
};

// Elements of one dtype that a collective writes.
struct ElementSpan {
  void* data = nullptr;
  std::size_t count = 0;
  Dtype dtype = Dtype::f32;

  std::size_t bytes() const { return count * size_of(dtype); }
  operator ConstElementSpan() const { return {data, count, dtype}; }
  template <Element T>
  static ElementSpan of(std::span<T> values) {
    return {values.data(), values.size(), dtype_of<T>};
  }
};

// Message tags: user code may use 0..kMaxTag.
using Tag = std::uint32_t;
inline constexpr Tag kMaxTag = (Tag{1} << 24) - 1;

// Who forms which group after Transport::split, the same on every rank.
struct SplitPlan {
  int color = -1;            // -1 (Transport::kNoColor): no new group for this rank
  int rank = -1;             // in the new group; -1 without one
  std::vector<int> members;  // the new group's ranks in the old one, in their new order
  std::uint64_t number = 0;  // splits the old group ran before this one
};

// True when a message of `length` bytes fits a receive buffer of `capacity`
// bytes that takes whole elements of `element` bytes.
inline bool message_fits(std::size_t length, std::size_t capacity, std::size_t element) {
  return length <= capacity && length % element == 0;
}

class Transport {
 public:
  virtual ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // "singleton", "tcp", "mpi" or "verbs".
  std::string_view backend() const { return backend_; }
  // The deadline of every blocking operation.
  std::chrono::milliseconds timeout() const { return timeout_; }
  // How this rank reaches `peer`: "self", "shared memory" (a rank of the
  // same host, unless RLX_SHM=0), or the backend's name ("tcp", "verbs", "mpi").
  virtual std::string path_to(int peer) const;
  // True while a collective runs on this transport (on any thread): what a
  // second, concurrent collective is refused for.
  bool collective_running() const { return collective_running_.load(std::memory_order_acquire); }

  // Sends `payload` (any length, including 0) to rank `to`.
  void send_bytes(int to, Tag tag, std::span<const std::byte> payload);
  // Receives the oldest message from rank `from` with `tag`, waiting up to timeout().
  std::vector<std::byte> recv_bytes(int from, Tag tag);
  // The same into the caller's buffer (no allocation; over shared memory the
  // bytes go from the ring, over TCP from the socket, straight into `into`
  // when this receive waits for its message); returns the message's
  // length. A message longer than `into` fails with invalid_argument and
  // stays queued: the next receive from `from` with `tag` gets it.
  std::size_t recv_bytes_into(int from, Tag tag, std::span<std::byte> into);
  // Typed point-to-point: `values`' bytes, received into a buffer of T; recv
  // returns how many elements arrived. A message that is longer than `into`
  // or not whole elements fails with invalid_argument and stays queued.
  template <class T, std::size_t N>
  requires Element<std::remove_const_t<T>>
  void send(int to, Tag tag, std::span<T, N> values) {
    send_bytes(to, tag, std::as_bytes(std::span<const T>(values)));
  }
  template <Element T, std::size_t N>
  std::size_t recv(int from, Tag tag, std::span<T, N> into) {
    return receive_into(from, tag, std::as_writable_bytes(std::span<T>(into)), sizeof(T)) /
           sizeof(T);
  }

  // Non-blocking point-to-point (MPI_Isend, MPI_Irecv): the same checks as
  // send_bytes and recv_bytes_into on this thread. An isend of at most
  // kEagerSendBytes with no send of its peer and tag pending is sent before
  // isend returns (a send never waits for its receiver); a larger one runs
  // in the background. An irecv is a posted record, no thread: it completes
  // inside its Request's wait() (with the transport's deadline from then) or
  // test() (when its message is there), or a blocking receive of its peer
  // and tag; until then what arrives for it is held without counting against
  // RLX_UNEXPECTED_BYTES. Any number may be outstanding. The buffer must stay
  // valid, and an irecv's untouched, until the Request completed;
  // Request::bytes() is then the length received. Operations of one peer and
  // tag, blocking or not, keep the order one thread issued them in (FIFO per
  // peer and tag, as for blocking calls); those of different peers or tags
  // complete in any order. A message too long for an irecv's buffer fails
  // that request with invalid_argument and stays queued for the next
  // receive. Errors as the blocking calls, thrown by wait() or test(); an
  // irecv not completed when the group is destroyed fails (one being waited
  // for holds the destructor until its deadline).
  Request isend(int to, Tag tag, std::span<const std::byte> payload);
  static constexpr std::size_t kEagerSendBytes = 64 * 1024;
  Request irecv(int from, Tag tag, std::span<std::byte> into) {
    return ireceive(from, tag, into, 1);
  }
  template <class T, std::size_t N>
  requires Element<std::remove_const_t<T>> Request isend(int to, Tag tag, std::span<T, N> values) {
    return isend(to, tag, std::as_bytes(std::span<const T>(values)));
  }
  // Typed: Request::bytes() / sizeof(T) elements arrived.
  template <Element T, std::size_t N>
  Request irecv(int from, Tag tag, std::span<T, N> into) {
    return ireceive(from, tag, std::as_writable_bytes(std::span<T>(into)), sizeof(T));
  }

  // Reduces `data` elementwise across ranks, in place. 16-bit floats are
  // accumulated in float; bool reduces as logical or (sum, max) / and (prod, min).
  void all_reduce(ElementSpan data, ReduceOp op);
  void all_sum(ElementSpan data) { all_reduce(data, ReduceOp::sum); }
  // Concatenates every rank's `input` in rank order into `output`, which
  // holds world_size() * input.count elements of the same dtype.
  void all_gather(ConstElementSpan input, ElementSpan output);
  // Reduces every rank's `input` elementwise and leaves block rank() of the
  // result in `output`: `input` holds world_size() blocks of output.count
  // elements (the reduce half of a ring all-reduce, as in ZeRO or sharded
  // optimisers). Reduction rules as all_reduce.
  void reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op);
  // Copies rank `root`'s `data` into every other rank's `data` (the same
  // count and dtype on every rank, as every argument of every collective).
  void broadcast(ElementSpan data, int root);
  // Personalised exchange: `input` holds world_size() blocks of equal size,
  // block j for rank j; afterwards block i of `output` is what rank i's
  // input held for this rank (MPI_Alltoall). `input` and `output` hold the
  // same number of elements of one dtype, and are the same buffer (in place)
  // or do not overlap.
  void all_to_all(ConstElementSpan input, ElementSpan output);
  // Rooted collectives (MPI_Reduce, MPI_Gather, MPI_Scatter). reduce leaves
  // the elementwise reduction of every rank's `data` in rank `root`'s `data`
  // and the others' `data` as it was. gather puts every rank's `input` (the
  // same count on every rank), in rank order, into rank `root`'s `output`
  // (world_size x input.count; other ranks' `output` is not used and may be
  // empty). scatter sends block r of rank `root`'s `input` (world_size
  // blocks of output.count) to rank r's `output` (other ranks' `input` is
  // not used and may be empty).
  void reduce(ElementSpan data, ReduceOp op, int root);
  void gather(ConstElementSpan input, ElementSpan output, int root);
  void scatter(ConstElementSpan input, ElementSpan output, int root);
  // Uneven all_gather: rank r contributes counts[r] elements (this rank's
  // `input` holds counts[rank()]); `output` receives every contribution in
  // rank order (sum of counts elements). Every rank passes the same counts,
  // zeros allowed. In place when `input` is this rank's part of `output`.
  void all_gather_v(ConstElementSpan input, ElementSpan output,
                    std::span<const std::size_t> counts);
  // Uneven all-to-all (MPI_Alltoallv): `input` holds send_counts[j] elements
  // for rank j, in rank order; `output` receives recv_counts[i] elements from
  // rank i, in rank order. send_counts[j] on rank i must be recv_counts[i]
  // on rank j (else a mismatch); zeros allowed; the buffers do not overlap.
  void all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                    ElementSpan output, std::span<const std::size_t> recv_counts);
  // Returns once every rank has entered the barrier.
  void barrier();

  // Splits this group as MPI_Comm_split does: a collective call of every
  // rank. Ranks passing the same `color` (0 or more) form a new group,
  // ordered by `key`, then by their rank here; a rank passing kNoColor takes
  // part and gets nullptr. A new group has its own connections (TCP, verbs),
  // communicator (MPI) and shared memory: its collectives and messages never
  // mix with this group's, and it may be used from another thread while this
  // one is. Errors as any collective (mismatch when ranks call something
  // else); a color below kNoColor is invalid_argument.
  static constexpr int kNoColor = -1;
  std::shared_ptr<Transport> split(int color, int key = 0);

  // Non-blocking collectives: the same checks as the blocking calls, on this
  // thread, then the collective runs in the background and the Request says
  // when it completed (wait(), test()). The buffers must stay valid and
  // untouched until then. Collectives of one transport run in the order they
  // were issued, blocking and non-blocking alike (a blocking one issued while
  // some are pending waits for them), so every rank must issue them in the
  // same order; several may be outstanding. An error (mismatch, peer lost,
  // timeout) is thrown by wait() or test().
  Request iall_reduce(ElementSpan data, ReduceOp op);
  Request iall_sum(ElementSpan data) { return iall_reduce(data, ReduceOp::sum); }
  Request iall_gather(ConstElementSpan input, ElementSpan output);
  Request ireduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op);
  Request ibroadcast(ElementSpan data, int root);
  Request iall_to_all(ConstElementSpan input, ElementSpan output);
  Request ireduce(ElementSpan data, ReduceOp op, int root);
  Request igather(ConstElementSpan input, ElementSpan output, int root);
  Request iscatter(ConstElementSpan input, ElementSpan output, int root);
  // The counts, as the buffers, must stay valid until the request completed.
  Request iall_gather_v(ConstElementSpan input, ElementSpan output,
                        std::span<const std::size_t> counts);
  Request iall_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                        ElementSpan output, std::span<const std::size_t> recv_counts);
  Request ibarrier();

  // Typed forms; any std::span extent works (std::span(vector), std::span(array)),
  // and read-only inputs take a span of T or of const T.
  template <Element T, std::size_t N>
  void all_reduce(std::span<T, N> data, ReduceOp op) {
    all_reduce(ElementSpan::of(std::span<T>(data)), op);
  }
  template <Element T, std::size_t N>
  void all_sum(std::span<T, N> data) {
    all_reduce(ElementSpan::of(std::span<T>(data)), ReduceOp::sum);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T>
  void all_gather(std::span<In, N> input, std::span<T, M> output) {
    all_gather(ConstElementSpan::of(std::span<const T>(input)),
               ElementSpan::of(std::span<T>(output)));
  }
  template <Element T, std::size_t N>
  void reduce(std::span<T, N> data, ReduceOp op, int root) {
    reduce(ElementSpan::of(std::span<T>(data)), op, root);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T>
  void gather(std::span<In, N> input, std::span<T, M> output, int root) {
    gather(ConstElementSpan::of(std::span<const T>(input)), ElementSpan::of(std::span<T>(output)),
           root);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T>
  void scatter(std::span<In, N> input, std::span<T, M> output, int root) {
    scatter(ConstElementSpan::of(std::span<const T>(input)), ElementSpan::of(std::span<T>(output)),
            root);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T>
  void all_gather_v(std::span<In, N> input, std::span<T, M> output,
                    std::span<const std::size_t> counts) {
    all_gather_v(ConstElementSpan::of(std::span<const T>(input)),
                 ElementSpan::of(std::span<T>(output)), counts);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T>
  void all_to_all_v(std::span<In, N> input, std::span<const std::size_t> send_counts,
                    std::span<T, M> output, std::span<const std::size_t> recv_counts) {
    all_to_all_v(ConstElementSpan::of(std::span<const T>(input)), send_counts,
                 ElementSpan::of(std::span<T>(output)), recv_counts);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T>
  void reduce_scatter(std::span<In, N> input, std::span<T, M> output, ReduceOp op) {
    reduce_scatter(ConstElementSpan::of(std::span<const T>(input)),
                   ElementSpan::of(std::span<T>(output)), op);
  }
  template <Element T, std::size_t N>
  void broadcast(std::span<T, N> data, int root) {
    broadcast(ElementSpan::of(std::span<T>(data)), root);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T>
  void all_to_all(std::span<In, N> input, std::span<T, M> output) {
    all_to_all(ConstElementSpan::of(std::span<const T>(input)),
               ElementSpan::of(std::span<T>(output)));
  }

  // Typed non-blocking forms.
  template <Element T, std::size_t N>
  Request iall_reduce(std::span<T, N> data, ReduceOp op) {
    return iall_reduce(ElementSpan::of(std::span<T>(data)), op);
  }
  template <Element T, std::size_t N>
  Request iall_sum(std::span<T, N> data) {
    return iall_reduce(ElementSpan::of(std::span<T>(data)), ReduceOp::sum);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T> Request iall_gather(std::span<In, N> input,
                                                                        std::span<T, M> output) {
    return iall_gather(ConstElementSpan::of(std::span<const T>(input)),
                       ElementSpan::of(std::span<T>(output)));
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T> Request ireduce_scatter(std::span<In, N> input,
                                                                            std::span<T, M> output,
                                                                            ReduceOp op) {
    return ireduce_scatter(ConstElementSpan::of(std::span<const T>(input)),
                           ElementSpan::of(std::span<T>(output)), op);
  }
  template <Element T, std::size_t N>
  Request ibroadcast(std::span<T, N> data, int root) {
    return ibroadcast(ElementSpan::of(std::span<T>(data)), root);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T> Request iall_to_all(std::span<In, N> input,
                                                                        std::span<T, M> output) {
    return iall_to_all(ConstElementSpan::of(std::span<const T>(input)),
                       ElementSpan::of(std::span<T>(output)));
  }
  template <Element T, std::size_t N>
  Request ireduce(std::span<T, N> data, ReduceOp op, int root) {
    return ireduce(ElementSpan::of(std::span<T>(data)), op, root);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T> Request igather(std::span<In, N> input,
                                                                    std::span<T, M> output,
                                                                    int root) {
    return igather(ConstElementSpan::of(std::span<const T>(input)),
                   ElementSpan::of(std::span<T>(output)), root);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T> Request iscatter(std::span<In, N> input,
                                                                     std::span<T, M> output,
                                                                     int root) {
    return iscatter(ConstElementSpan::of(std::span<const T>(input)),
                    ElementSpan::of(std::span<T>(output)), root);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T> Request iall_gather_v(
      std::span<In, N> input, std::span<T, M> output, std::span<const std::size_t> counts) {
    return iall_gather_v(ConstElementSpan::of(std::span<const T>(input)),
                         ElementSpan::of(std::span<T>(output)), counts);
  }
  template <class In, Element T, std::size_t N, std::size_t M>
  requires std::same_as<std::remove_const_t<In>, T> Request
  iall_to_all_v(std::span<In, N> input, std::span<const std::size_t> send_counts,
                std::span<T, M> output, std::span<const std::size_t> recv_counts) {
    return iall_to_all_v(ConstElementSpan::of(std::span<const T>(input)), send_counts,
                         ElementSpan::of(std::span<T>(output)), recv_counts);
  }

  // An ErrorSite naming this rank, for backends and algorithms building errors.
  ErrorSite site(std::string_view operation, int peer = -1, std::string sizes = {}) const;
  // The site of a receive from `from` with `tag` ("recv_bytes (tag 3)").
  ErrorSite receive_site(int from, Tag tag) const;
  // Runs `wait`, a receive's wait on the connection layer (a channel, the
  // mailbox, a verbs engine), and reports a failure it meets as this
  // receive's: those layers keep one failure per peer, built by whichever
  // call met it first.
  template <class Wait>
  decltype(auto) as_receive_from(int from, Tag tag, Wait&& wait) const {
    try {
      return std::forward<Wait>(wait)();
    } catch (const CollectiveError& error) {
      throw error.seen_from(receive_site(from, tag));
    }
  }

 protected:
  Transport(int rank, int world_size, std::string backend, std::chrono::milliseconds timeout);

  // Creates this rank's new group, or nullptr without one. Every rank of
  // this group calls it, with or without a new group: a backend that
  // exchanges addresses over this group does so with every rank.
  virtual std::shared_ptr<Transport> do_split(const SplitPlan& plan) = 0;

  // This group's next collective as every rank describes it: every rank's
  // n-th call is numbered n, which each backend checks across ranks.
  CollectiveCall next_call(CollectiveKind kind, ReduceOp op, Dtype dtype, std::uint64_t count,
                           int root = -1);

  // First in every backend's destructor, while the backend still works:
  // non-blocking operations not yet started fail, the running ones finish.
  void stop_background_work();

  virtual void do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) = 0;
  virtual std::vector<std::byte> do_recv_bytes(int from, Tag tag) = 0;
  // Receives the next message into `into` when it fits and
  // returns its length (message_fits); otherwise passes it to place_or_keep, which keeps it
  // for the next receive and throws. The default receives with do_recv_bytes
  // and copies; a backend that can receive in place overrides it.
  virtual std::size_t do_recv_bytes_into(int from, Tag tag, std::span<std::byte> into,
                                         std::size_t element);
  // The same without waiting for a message that has not begun to arrive:
  // nullopt when none from `from` with `tag` is there (what Request::test()
  // and posted receives advance by). Throws the peer's failure once nothing
  // from it is left.
  virtual std::optional<std::size_t> do_try_recv_bytes_into(int from, Tag tag,
                                                            std::span<std::byte> into,
                                                            std::size_t element) = 0;
  // `change` non-blocking receives from `from` with `tag` were posted (+1)
  // or ended (-1): a backend that holds early messages up to
  // RLX_UNEXPECTED_BYTES holds theirs beyond it.
  virtual void do_expect_messages(int from, Tag tag, int change);
  // Copies `message` into `into` and returns its length when it fits; else
  // keeps it, whole, for the next receive from `from` with `tag`, and throws
  // invalid_argument naming both sizes.
  std::size_t place_or_keep(int from, Tag tag, std::vector<std::byte> message,
                            std::span<std::byte> into, std::size_t element);
  // A message place_or_keep copied out: a backend that reuses message
  // buffers takes it back (SpareBuffers); the default frees it.
  virtual void recycle(std::vector<std::byte>&& message) noexcept { (void)message; }
  // Only called with world_size() > 1 and validated arguments.
  virtual void do_all_reduce(ElementSpan data, ReduceOp op) = 0;
  virtual void do_all_gather(ConstElementSpan input, ElementSpan output) = 0;
  virtual void do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) = 0;
  virtual void do_broadcast(ElementSpan data, int root) = 0;
  // `input` and `output` are the same buffer or do not overlap.
  virtual void do_all_to_all(ConstElementSpan input, ElementSpan output) = 0;
  // Rooted: non-root ranks pass an empty `output` to do_gather and an empty
  // `input` to do_scatter.
  virtual void do_reduce(ElementSpan data, ReduceOp op, int root) = 0;
  virtual void do_gather(ConstElementSpan input, ElementSpan output, int root) = 0;
  virtual void do_scatter(ConstElementSpan input, ElementSpan output, int root) = 0;
  virtual void do_all_gather_v(ConstElementSpan input, ElementSpan output,
                               std::span<const std::size_t> counts) = 0;
  virtual void do_all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                               ElementSpan output, std::span<const std::size_t> recv_counts) = 0;
  virtual void do_barrier() = 0;

 private:
  // Marks a collective as running on this transport for one scope; throws
  // when another one already is (two threads sharing one transport).
  class CollectiveScope {
   public:
    CollectiveScope(Transport& transport, std::string_view operation)
        : running_(transport.collective_running_) {
      if (running_.exchange(true, std::memory_order_acquire)) throw transport.refused(operation);
    }
    ~CollectiveScope() { running_.store(false, std::memory_order_release); }
    CollectiveScope(const CollectiveScope&) = delete;
    CollectiveScope& operator=(const CollectiveScope&) = delete;

   private:
    std::atomic<bool>& running_;
  };

  // Runs `work` (a do_* call) in issue order on this thread; throws
  // invalid_argument when another thread's blocking collective runs.
  template <class Work>
  void run_collective(const RecordedCall& call, Work&& work);
  // Each collective once, for its blocking and its non-blocking call: the
  // checks, the group of one, then `work` now or in the background.
  enum class Mode { blocking, background };
  template <class Work>
  Request start(Mode mode, const RecordedCall& call, Work&& work);
  Request start_all_reduce(ElementSpan data, ReduceOp op, Mode mode);
  Request start_all_gather(ConstElementSpan input, ElementSpan output, Mode mode);
  Request start_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op, Mode mode);
  Request start_broadcast(ElementSpan data, int root, Mode mode);
  Request start_all_to_all(ConstElementSpan input, ElementSpan output, Mode mode);
  Request start_reduce(ElementSpan data, ReduceOp op, int root, Mode mode);
  Request start_gather(ConstElementSpan input, ElementSpan output, int root, Mode mode);
  Request start_scatter(ConstElementSpan input, ElementSpan output, int root, Mode mode);
  Request start_all_gather_v(ConstElementSpan input, ElementSpan output,
                             std::span<const std::size_t> counts, Mode mode);
  Request start_all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                             ElementSpan output, std::span<const std::size_t> recv_counts,
                             Mode mode);
  Request start_barrier(Mode mode);
  Request submit_collective(const RecordedCall& call, std::function<void()> work);
  CollectiveError refused(std::string_view operation) const;

  // recv_bytes_into and recv: `into` takes whole `element`s.
  std::size_t receive_into(int from, Tag tag, std::span<std::byte> into, std::size_t element);
  // The same, arguments checked, in order after posted operations.
  std::size_t receive_checked(int from, Tag tag, std::span<std::byte> into, std::size_t element);
  // The same, only when a message is there (do_try_recv_bytes_into).
  std::optional<std::size_t> try_receive_checked(int from, Tag tag, std::span<std::byte> into,
                                                 std::size_t element);
  Request ireceive(int from, Tag tag, std::span<std::byte> into, std::size_t element);
  void check_send(int to, Tag tag, std::span<const std::byte> payload,
                  std::string_view operation) const;
  void check_receive(int from, Tag tag, std::span<std::byte> into,
                     std::string_view operation) const;
  // A message kept by place_or_keep, oldest first; none without a lock when
  // nothing is kept.
  std::optional<std::vector<std::byte>> take_kept(int from, Tag tag);

  void check_peer(int peer, std::string_view operation) const;
  void check_tag(Tag tag, std::string_view operation) const;
  void check_payload(std::span<const std::byte> payload, std::string_view operation) const;
  // A valid dtype, a byte size that fits in size_t, and a buffer unless empty.
  void check_elements(std::string_view operation, const void* data, std::size_t count,
                      Dtype dtype) const;
  void check_op(std::string_view operation, ReduceOp op) const;
  void check_all_reduce(ElementSpan data, ReduceOp op) const;
  // all_gather (`gathers`: the output holds world_size blocks of the
  // input's size) and reduce_scatter (the input holds world_size of the
  // output's): same dtypes, those sizes, no null buffer unless empty.
  void check_blocks(std::string_view operation, ConstElementSpan input, ElementSpan output,
                    bool gathers) const;
  // Equal sizes and dtypes, world_size blocks, and no partial overlap.
  void check_all_to_all(ConstElementSpan input, ElementSpan output) const;
  // The root's side of gather (gathers) or scatter: valid elements of one
  // dtype, world_size blocks; the other ranks' side is ignored.
  void check_rooted_blocks(std::string_view operation, ConstElementSpan input, ElementSpan output,
                           int root, bool gathers) const;
  // Valid elements on both sides, of one dtype.
  void check_two_sides(std::string_view operation, ConstElementSpan input,
                       ElementSpan output) const;
  // world_size counts adding up to `total` elements (no overflow).
  void check_counts(std::string_view operation, std::span<const std::size_t> counts,
                    std::size_t total, std::string_view what) const;
  void check_all_gather_v(ConstElementSpan input, ElementSpan output,
                          std::span<const std::size_t> counts) const;
  void check_all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                          ElementSpan output, std::span<const std::size_t> recv_counts) const;

  int rank_;
  int world_size_;
  std::string backend_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> collective_running_{false};
  std::atomic<std::size_t> kept_count_{0};
  std::mutex kept_mutex_;
  std::map<std::pair<int, Tag>, std::deque<std::vector<std::byte>>> kept_;
  CollectiveStream stream_;
  PointToPointStream p2p_stream_;   // isend
  PostedReceives posted_receives_;  // irecv
  std::uint64_t splits_ = 0;
  std::uint64_t calls_numbered_ = 0;  // next_call
  // This group in the flight recorder, and its calls so far there.
  std::uint32_t record_group_ = 0;
  std::uint64_t recorded_collectives_ = 0;  // counted under CollectiveScope
};

template <class Work>
void Transport::run_collective(const RecordedCall& call, Work&& work) {
  const bool ran = stream_.run_in_order([&] {
    CollectiveScope running(*this, call.operation);
    run_recorded(record_group_, call, recorded_collectives_++, work);
  });
  if (!ran) throw refused(call.operation);
}

template <class Work>
Request Transport::start(Mode mode, const RecordedCall& call, Work&& work) {
  if (mode == Mode::background) return submit_collective(call, std::forward<Work>(work));
  run_collective(call, work);
  return {};
}

}  // namespace rlx
