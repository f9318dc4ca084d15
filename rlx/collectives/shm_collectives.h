// Collectives among the ranks of one host, through their shared segments
// (rlx/transport/shm/node.h): designed for shared memory, not a ring over a
// faster pipe.
//
// Every call starts by posting its CollectiveCall in this rank's call line
// and reading every peer's (a mismatch fails every rank before any data
// moves), except where a rank needs nothing of the others: a small
// broadcast's or scatter's root, and a small reduce's or gather's non-roots,
// post and return, and check the others' lines as a later call starts (see
// shm_call_lines.cc). Small payloads ride inline in the call line, so a small
// all-reduce, all-gather or barrier is one cache-line write and n-1 reads:
// every rank reduces all the inputs itself, in rank order, so results are
// bit-identical (but for the payload of a NaN made of two NaNs: compilers
// may order the operands of a commutative op as they like). Large ones are
// cut into chunks that stream through a few staging slots small enough to
// stay in cache; per chunk each rank stages the pieces the others need,
// reduces its own block's piece from everyone's staged copy, and copies the
// others' reduced pieces out (a direct reduce-scatter then an all-gather by
// copy-out). With two ranks a reduce or all-reduce has no split: each rank
// that needs the result (a reduce's root, every all-reduce rank) reduces the
// other's staged piece into its own buffer. The caller's buffer is read once
// and written once; slots are reused once every rank has read them.
//
// Waits poll briefly and then sleep on the rank's Doorbell with the
// operation's deadline, and wake when the transport fails.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rlx/collectives/reduce.h"
#include "rlx/transport/collective_call.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/shm/node.h"
#include "rlx/transport/transport.h"

namespace rlx {

// How a buffer of `count` elements splits into `parts` blocks: block i
// starts at begin(i); blocks differ in length by at most one element.
struct BlockSplit {
  std::size_t count = 0;
  int parts = 1;
  std::size_t begin(int part) const {
    return count / static_cast<std::size_t>(parts) * static_cast<std::size_t>(part) +
           std::min<std::size_t>(static_cast<std::size_t>(part),
                                 count % static_cast<std::size_t>(parts));
  }
  std::size_t length(int part) const { return begin(part + 1) - begin(part); }
};

// Whether the ranks of this host read each other's buffers directly
// (rlx/transport/shm/single_copy.h), and their processes.
struct SingleCopyPeers {
  std::vector<std::int32_t> pids;          // by local rank; empty when unavailable
  std::string unavailable = "not probed";  // why not, when pids is empty
};

class ShmCollectives {
 public:
  struct Hooks {
    // An ErrorSite naming this rank, `operation`, the peer (job rank) and the sizes.
    std::function<ErrorSite(std::string_view operation, int peer, std::string sizes)> site;
    // The transport cannot go on: record `error`, tell the other ranks.
    std::function<void(const CollectiveError& error)> fail;
    // For timeout messages: which ranks' processes still answer.
    std::function<std::string()> describe_silent_peers = [] { return std::string(); };
  };

  ShmCollectives(const shm::Node& node, const FailureLatch& latch,
                 std::chrono::milliseconds timeout, shm::SpinPolicy policy, Hooks hooks,
                 SingleCopyPeers single_copy = {});

  int local_rank() const { return node_.local_rank(); }
  int local_size() const { return node_.local_size(); }

  // As Transport's collectives, among the ranks of this host. `call` is the
  // caller's description (its sequence is not compared: calls are numbered here).
  void all_reduce(const CollectiveCall& call, ElementSpan data);
  void all_gather(const CollectiveCall& call, ConstElementSpan input, ElementSpan output);
  void reduce_scatter(const CollectiveCall& call, ConstElementSpan input, ElementSpan output);
  void barrier(const CollectiveCall& call);
  // Copies local rank `root`'s `data` to every local rank.
  void broadcast(const CollectiveCall& call, ElementSpan data, int root);
  // As Transport::all_to_all (blocks of call.count elements), in place too.
  void all_to_all(const CollectiveCall& call, ConstElementSpan input, ElementSpan output);
  // As Transport::reduce and gather to call.root (a job rank: these run
  // only when every rank of the job is on this host): inline when the data
  // fits the call lines, else pipelined through the staging slots.
  void reduce(const CollectiveCall& call, ElementSpan data);
  void gather(const CollectiveCall& call, ConstElementSpan input, ElementSpan output);
  // As Transport::scatter from call.root, when the root's whole input fits
  // the call lines. It first checks every rank's call; when the input does
  // not fit it returns false having done only that, and the caller runs the
  // network algorithm (every rank decides alike: the calls are equal).
  bool scatter_inline(const CollectiveCall& call, ConstElementSpan input, ElementSpan output);

  // Single copy (shm_single_copy.cc): every rank posts the address of the
  // buffer the others read, each reads what it needs straight from the
  // peers' processes (process_vm_readv), and a rank whose buffer is read
  // returns once every reader is done. Empty when this host's ranks can,
  // else why not (set-up probed every pair).
  const std::string& single_copy_unavailable() const { return single_copy_.unavailable; }
  void all_gather_single_copy(const CollectiveCall& call, ConstElementSpan input,
                              ElementSpan output);
  void broadcast_single_copy(const CollectiveCall& call, ElementSpan data, int root);
  void gather_single_copy(const CollectiveCall& call, ConstElementSpan input, ElementSpan output);
  void scatter_single_copy(const CollectiveCall& call, ConstElementSpan input, ElementSpan output);

  // Only the check every call starts with: posts `call` and fails unless
  // every rank of the host posted the same. Collectives that then run over
  // the network call it first, so a rank in a shared-memory collective meets
  // their different call here (a mismatch) rather than waiting out its
  // deadline for a call that went elsewhere.
  void check_call(const CollectiveCall& call);

  // Checks what this rank's calls left unchecked (the lines of calls it
  // returned from without waiting), waiting for them with one deadline for
  // all, and tells the peers it read every line: the group's close calls it.
  void finish_deferred_checks();
  // Without waiting or failing: the mismatch in the lines this rank's calls
  // left unchecked that are posted by now, or empty. For the close after a
  // failure (a timeout in a receive, say), which can no longer report it as
  // a failure; it may have been the failure's cause.
  std::string unchecked_mismatch() const;

  // What fits the call lines (a call's payload that rides in them at once).
  std::size_t inline_capacity() const { return node_.shape().call_capacity(); }
  // How a call that posts `posted_bytes` moves, for the debug log: one-shot
  // through the call lines or pipelined through the staging slots.
  std::string protocol(std::size_t posted_bytes) const;

  // The halves of all_reduce, for hierarchical collectives: afterwards block
  // local_rank() (of split {data.count, local_size()}) of `data` holds the
  // reduction of every local rank's block; then every block is every rank's.
  void reduce_scatter_blocks(const CollectiveCall& call, ElementSpan data);
  void all_gather_blocks(const CollectiveCall& call, ElementSpan data);

 private:
  // Drains the deferred checks, posts `call` (and `inline_payload` when it
  // fits inline), then waits for every peer's call and checks it is the same
  // (their lines fetched early, prefetch_lines). Returns the call's number,
  // whose call lines hold everyone's inline payload.
  std::uint64_t open_call(const CollectiveCall& call, std::span<const std::byte> inline_payload);
  // Starts loading every peer's line of call `number` and its payload of
  // `payload_bytes` into this core's cache while this rank posts its own, so
  // the line and its payload slot do not miss one after the other. A line
  // not posted yet is loaded again when it is. Only where every rank reads
  // every line (docs/BENCHMARKS.md, "Small calls on one host").
  void prefetch_lines(std::uint64_t number, std::size_t payload_bytes) const;
  // The two halves of open_call. Nothing may touch a caller's output between
  // them: a mismatch must leave it as it was.
  std::uint64_t post_call(const CollectiveCall& call, std::span<const std::byte> inline_payload);
  // Waits for every peer's call `number` (after every deferred check) and
  // fails unless it is `call`.
  void check_calls(const CollectiveCall& call, std::uint64_t number);
  // Waits for local rank `peer`'s call `number` and fails unless it is `call`.
  void check_call_of(const CollectiveCall& call, std::uint64_t number, int peer);
  // Local rank `peer`'s line of `number` against `call`: false when it is not
  // posted yet and `wait` is false. `deferred`: this rank's call returned.
  bool check_line(const CollectiveCall& call, std::uint64_t number, int peer, bool wait,
                  bool deferred);
  // What is wrong with local rank `peer`'s posted line of `number` for `call`.
  std::optional<CollectiveError> line_error(const CollectiveCall& call, std::uint64_t number,
                                            int peer, bool deferred) const;
  // This rank returned from call `number` without reading its peers' lines
  // (only `only_peer`'s, when not -1): a later call checks them.
  void defer_check(const CollectiveCall& call, std::uint64_t number, int only_peer);
  // Runs the deferred checks in order: those of calls before `through`
  // waiting for their lines, later ones only while their lines are posted.
  void run_deferred_checks(std::uint64_t through);
  // Every deferred check, before a call that waits for every rank posts its
  // line: a rank whose earlier call mismatched never posts it, so no peer
  // passes that call (its peers fail there, told by this rank).
  void drain_deferred_checks();
  // Before call `number` reuses its slot: this rank's checks of the call that
  // held it are done, and every peer finished reading that call's line.
  // (`payload_depth`: and of its payload slot, that many calls deep.)
  void make_room(const CollectiveCall& call, std::uint64_t number, int payload_depth);
  // How many calls this rank has read every line of: those before its
  // oldest deferred check, or before its open call.
  std::uint64_t calls_read_now() const;
  // Stores it where peers look; true when it changed.
  bool publish_calls_read(std::uint64_t calls_read);
  // Runs the deferred checks whose lines came, and publishes the count: before
  // any wait of this rank sleeps.
  void advance_deferred_checks();
  bool fits_inline(std::size_t bytes) const { return bytes <= node_.shape().call_capacity(); }
  // A single-copy call: posts `call` and where this rank's `buffer` (the one
  // its peers read; null: none) is, checks every rank's call, runs
  // `reads(number)` (read_posted of the peers' buffers), then finish_reads,
  // which waits for this rank's readers when it has a buffer. A failure
  // after the posting marks the call abandoned (RankControl::abandoned).
  template <class Reads>
  void single_copy_call(const CollectiveCall& call, const void* buffer, std::size_t bytes,
                        Reads&& reads);
  void read_posted(const CollectiveCall& call, std::uint64_t number, int peer, std::size_t offset,
                   std::span<std::byte> into);
  void finish_reads(const CollectiveCall& call, std::uint64_t number, bool read_from);
  [[noreturn]] void fail_read(const CollectiveCall& call, std::uint64_t number, int peer,
                              int error);
  // Local rank `peer` gave up on this call (a failure of its own): throws
  // that failure once it arrives, else a timeout naming the peer.
  [[noreturn]] void fail_abandoned(const CollectiveCall& call, int peer);
  // out = x(0) op x(1) op ... op x(n-1), in rank order on every rank, so
  // every rank's result is bit-identical. `x(j)` may be `out` only for j = 0.
  template <class Operand>
  void reduce_in_rank_order(ElementSpan out, ReduceOp op, Operand&& x) const;
  // Pipelined through the staging slots: rank j's block j of `in` (blocks
  // as `split`) is reduced across ranks into `my_out` (none: it stays in the
  // slot); when `gathers` (the same on every rank), each reduced piece is
  // published, and a rank with `gather_base` copies every rank's into its
  // place there (every rank: all_reduce; the root alone: reduce).
  void reduce_pipelined(const CollectiveCall& call, const std::byte* in, std::byte* my_out,
                        std::byte* gather_base, BlockSplit split, bool gathers);
  // Reduce or all-reduce with two ranks, pipelined: a rank that `stages`
  // copies its whole input piece by piece into its slots, and a rank that
  // `reduces` reduces each of the other's pieces with its own straight into
  // `data` (a reduce: the non-root stages, the root reduces; an all-reduce:
  // both do both). Each byte is copied once and reduced once where
  // reduce_pipelined also gathers the halves.
  void reduce_pair_pipelined(const CollectiveCall& call, ElementSpan data, bool stages,
                             bool reduces);
  // Pipelined: this rank's `my_block` (block local_rank() of `split`) goes to
  // its place in `out_base` of every rank that has one (every rank:
  // all_gather; the root alone: gather), and theirs to this rank's. A rank
  // whose block nobody reads (the root of a gather) passes `staged` false.
  void gather_pipelined(const CollectiveCall& call, const std::byte* my_block, std::byte* out_base,
                        BlockSplit split, bool staged = true);
  // Pipelined all-to-all of blocks of `block` bytes (`in` may be `out`).
  void exchange_pipelined(const CollectiveCall& call, const std::byte* in, std::byte* out,
                          std::size_t block);
  // Elements of block `part` of `split` in chunk `chunk` of `piece` elements.
  struct Piece {
    std::size_t begin = 0;
    std::size_t length = 0;
  };
  static Piece piece_of(BlockSplit split, int part, std::size_t chunk, std::size_t piece);

  // The next ticket, once every peer finished reading the slot it reuses.
  std::uint64_t take_ticket(const CollectiveCall& call);
  using Phase = shm::Progress;
  void publish(Phase phase, std::uint64_t ticket);
  // Until local rank `peer` reached `ticket` in `phase`; throws at the deadline.
  void wait_for(int peer, Phase phase, std::uint64_t ticket, const CollectiveCall& call);
  void wait_for_all(Phase phase, std::uint64_t ticket, const CollectiveCall& call);
  // Until `ready()`, or throws (timeout naming `peer` and `what`, or the
  // transport's failure).
  template <class Ready>
  void wait_or_throw(Ready&& ready, int peer, const CollectiveCall& call, std::string_view what);
  void ring_peers();
  // The debug log's line for `call`: the path and the algorithm, and why.
  [[noreturn]] void fail_with(CollectiveError error);
  ErrorSite site_of(const CollectiveCall& call, int peer) const;

  const shm::Node& node_;
  const FailureLatch& latch_;
  const std::chrono::milliseconds timeout_;
  const shm::SpinPolicy policy_;
  const Hooks hooks_;
  const SingleCopyPeers single_copy_;
  std::uint64_t calls_ = 0;    // calls this rank opened
  std::uint64_t tickets_ = 0;  // chunks this rank staged, over every call

  struct DeferredCheck {
    std::uint64_t number = 0;
    CollectiveCall call;
    int only_peer = -1;  // -1: every peer's line
  };
  // The deferred checks of calls [deferred_begin_, deferred_end_) of
  // `deferred_`, a ring of kCallSlots: at most one per line is ever due.
  std::vector<DeferredCheck> deferred_;
  std::uint64_t deferred_begin_ = 0;
  std::uint64_t deferred_end_ = 0;
  std::uint64_t published_calls_read_ = 0;
  std::uint64_t open_number_ = 0;  // the call this rank is in, or the next
  bool running_deferred_checks_ = false;
  // Set by the close: its waits share one deadline.
  Clock::time_point close_deadline_ = Clock::time_point::max();
  std::vector<std::uint64_t> peers_calls_read_;  // as last seen, by local rank
};

template <class Operand>
void ShmCollectives::reduce_in_rank_order(ElementSpan out, ReduceOp op, Operand&& x) const {
  if (local_size() == 1) {
    const ConstElementSpan only = x(0);
    if (only.data != out.data) std::memcpy(out.data, only.data, out.bytes());
    return;
  }
  reduce_to(out, x(0), x(1), op);
  for (int j = 2; j < local_size(); ++j) reduce_into(out, x(j), op);
}

template <class Ready>
void ShmCollectives::wait_or_throw(Ready&& ready, int peer, const CollectiveCall& call,
                                   std::string_view what) {
  if (ready()) return;
  shm::Doorbell& bell = node_.control(local_rank()).bell;
  const bool arrived = shm::wait_until(
      bell, [&] { return ready() || latch_.tripped() || node_.has_closed(peer); },
      std::min(Clock::now() + timeout_, close_deadline_), policy_,
      [this] { advance_deferred_checks(); });
  // What arrived wins over a failure found meanwhile: a peer that did its
  // part of this call and then exited or closed cost this call nothing.
  if (arrived && ready()) return;
  if (latch_.tripped()) latch_.rethrow_if_tripped(hooks_.site(call.describe(), -1, {}));
  const int rank = node_.world_rank(peer);
  if (node_.has_closed(peer)) {
    fail_with(CollectiveError(
        ErrorKind::peer_lost, site_of(call, peer),
        "rank " + std::to_string(rank) +
            " (same host, shared memory) has shut down its transport "
            "before it " +
            std::string(what),
        "did rank " + std::to_string(rank) + " close its group or return from main early?"));
  }
  fail_with(CollectiveError(
      ErrorKind::timeout, site_of(call, peer),
      "rank " + std::to_string(rank) + " (same host, shared memory) has not " + std::string(what) +
          " within " + std::to_string(timeout_.count()) + " ms" + hooks_.describe_silent_peers(),
      "a rank that never reached this collective, or a stopped process "
      "(RLX_TIMEOUT_S sets the deadline)"));
}

}  // namespace rlx
