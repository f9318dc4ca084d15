// The collective algorithms, written once over Links and used by every
// backend that has no native collectives of its own (TCP, verbs).
//
// Every rank calls the same function with the same CollectiveCall (kind, op,
// dtype, count, sequence); Links verifies that agreement on every step. Each
// algorithm leaves bit-identical results on every rank.
#pragma once

#include "rlx/collectives/links.h"
#include "rlx/collectives/tuning.h"

namespace rlx {

// The network algorithm algorithm_table.h chooses (a step of a
// hierarchical collective, or set-up's own all_gather: `tuning`'s rules
// naming a network algorithm apply, the others do not).
// In place: recursive doubling for small buffers and the ring for large, at
// the crossover `tuning`'s cost model predicts.
void all_reduce(Links& links, const CollectiveCall& call, ElementSpan data, const Tuning& tuning);

// Bandwidth-optimal: reduce-scatter then all-gather around both directions of
// the ring, over every lane, each step's receive reduced as it streams in.
// Moves 2 (n-1)/n of the buffer per rank.
void all_reduce_ring(Links& links, const CollectiveCall& call, ElementSpan data);

// Latency-optimal: log2(n) exchanges of the whole buffer with partners at
// doubling distances; ranks beyond the largest power of two fold into it first.
void all_reduce_recursive_doubling(Links& links, const CollectiveCall& call, ElementSpan data);

// Concatenates every rank's `input` (call.count elements) in rank order into
// `output` (n x call.count). Recursive doubling (power-of-two world sizes)
// or direct exchange for small blocks, the bidirectional ring for large, as
// the defaults of algorithm_table.h choose.
void all_gather(Links& links, const CollectiveCall& call, ConstElementSpan input,
                ElementSpan output);
// log2(n) exchanges with partners at doubling distances, each of the group of
// blocks gathered so far; needs a power-of-two world size (else invalid_argument).
void all_gather_recursive_doubling(Links& links, const CollectiveCall& call, ConstElementSpan input,
                                   ElementSpan output);
void all_gather_ring(Links& links, const CollectiveCall& call, ConstElementSpan input,
                     ElementSpan output);
void all_gather_direct(Links& links, const CollectiveCall& call, ConstElementSpan input,
                       ElementSpan output);

// `input` holds n blocks of call.count elements; `output` receives the
// reduction of every rank's block `rank`. Runs the ring in links.scratch(),
// so neither buffer is modified beyond `output`.
void reduce_scatter(Links& links, const CollectiveCall& call, ConstElementSpan input,
                    ElementSpan output);
// `data` holds n blocks of call.count elements; afterwards block `rank` holds
// the reduction of every rank's block `rank` (the other blocks are scratch).
void reduce_scatter_ring(Links& links, const CollectiveCall& call, ElementSpan data);

// Which of this rank's two check frames (to its right neighbour, from its
// left) a frame of its tree stands in for: only one the tree sends first
// thing, before any receive, so it is on the socket as early as a check
// frame would be.
struct RootCheckRoute {
  bool sent_by_tree = false;      // this rank's tree sends to its right neighbour first
  bool received_by_tree = false;  // the left neighbour's tree sends to this rank first
};

// Every rank shows its call to its right neighbour and reads its left
// neighbour's: what the rooted algorithms run around their tree, so ranks
// that disagree on the root fail with mismatch instead of finishing trees
// of their own. Construct it before the tree's first step and finish() it
// after the last: with two lanes or more the check rides on a lane of its
// own while the tree runs (it costs no round, and no frame at all where the
// tree's stands in); with one it runs whole in the constructor.
class RootCheck {
 public:
  RootCheck(Links& links, const CollectiveCall& call, RootCheckRoute route);
  void finish();

 private:
  Links& links_;
  const CollectiveCall& call_;
  const RootCheckRoute route_;
  const bool beside_;  // on a lane of its own
};

// Rooted: `data` of rank call.root reduced from every rank's (binomial tree;
// the others' `data` is left as it was); every rank's `input` gathered into
// the root's `output`, rank order; block r of the root's `input` scattered
// to rank r's `output` (direct exchanges with the root).
void reduce_binomial(Links& links, const CollectiveCall& call, ElementSpan data);
void gather_direct(Links& links, const CollectiveCall& call, ConstElementSpan input,
                   ElementSpan output);
void scatter_direct(Links& links, const CollectiveCall& call, ConstElementSpan input,
                    ElementSpan output);

// Copies `data` of rank call.root to every rank (binomial tree).
void broadcast(Links& links, const CollectiveCall& call, ElementSpan data);

// `input` holds n blocks of call.count elements, block j for rank j; block
// i of `output` receives rank i's block for this rank. `input` may be
// `output` (in place: the input is copied to links.scratch() first). Direct:
// one step to every peer; pairwise: n - 1 steps.
void all_to_all_direct(Links& links, const CollectiveCall& call, ConstElementSpan input,
                       ElementSpan output);
void all_to_all_pairwise(Links& links, const CollectiveCall& call, ConstElementSpan input,
                         ElementSpan output);

// Uneven forms: rank r's block holds counts[r] elements (all_gather_v), or
// rank i sends send_counts[j] elements to rank j, which expects
// recv_counts[i] of them (all_to_all_v); blocks lie in rank order. Frame
// lengths are checked against the receiver's counts (mismatch otherwise).
void all_gather_v(Links& links, const CollectiveCall& call, ConstElementSpan input,
                  ElementSpan output, std::span<const std::size_t> counts);
void all_to_all_v(Links& links, const CollectiveCall& call, ConstElementSpan input,
                  std::span<const std::size_t> send_counts, ElementSpan output,
                  std::span<const std::size_t> recv_counts);

// Dissemination barrier: ceil(log2 n) rounds, no rank leaves before all entered.
void barrier_dissemination(Links& links, const CollectiveCall& call);

// Below this many bytes per rank all_gather exchanges directly.
std::size_t all_gather_ring_threshold(int world_size);

}  // namespace rlx
