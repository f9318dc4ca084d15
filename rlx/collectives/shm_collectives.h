// Collectives among the ranks of one host, through their shared segments
// (rlx/transport/shm/node.h): designed for shared memory, not a ring over a
// faster pipe.
//
// Every call starts by posting its CollectiveCall in this rank's call line
// and reading every peer's (a mismatch fails every rank before any data
// moves). Small payloads ride inline in the call line, so a small
// all-reduce, all-gather or barrier is one cache-line write and n-1 reads:
// every rank reduces all the inputs itself, in rank order, so results are
// bit-identical. Large ones are cut into chunks that stream through a few
// staging slots small enough to stay in cache; per chunk each rank stages the
// pieces the others need, reduces its own block's piece from everyone's
// staged copy, and copies the others' reduced pieces out (a direct
// reduce-scatter then an all-gather by copy-out). The caller's buffer is read
// once and written once; slots are reused once every rank has read them.
//
// Waits poll briefly and then sleep on the rank's Doorbell with the
// operation's deadline, and wake when the transport fails.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
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
  // Posts `call` (and `inline_payload` when it fits in the call line), then
  // waits for every peer's call and checks it is the same. Returns the call's
  // number, whose call lines hold everyone's inline payload.
  std::uint64_t open_call(const CollectiveCall& call, std::span<const std::byte> inline_payload);
  // The two halves of open_call. Nothing may touch a caller's output between
  // them: a mismatch must leave it as it was.
  std::uint64_t post_call(const CollectiveCall& call, std::span<const std::byte> inline_payload);
  void check_calls(const CollectiveCall& call, std::uint64_t number);
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

}  // namespace rlx
