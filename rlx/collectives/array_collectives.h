// Collectives on lazy arrays: the collective.* ops of core's registries.
//
//   Array y = rlx::distributed::all_sum(rlx::matmul(x, w));  // nothing runs yet
//   rlx::eval(y);                                            // the all-reduce runs here
//
// Each op exists at both levels of core's registries: an OpExtension (shape
// inference, for Graph and CompiledGraph) and an array kernel returning a
// lazy array whose primitive runs the collective on the input's data when it
// is evaluated, on whichever thread evaluates it (async_eval's worker
// included). Attributes name the reduction and the group: "<op> <group id>",
// for example "sum 0"; group 0 is the default group that rlx::init sets.
//
//   collective.all_reduce      same shape; attrs "sum|prod|min|max <group>"
//   collective.all_gather      axis 0 multiplied by the group size; attrs "<group>"
//   collective.reduce_scatter  axis 0 divided by the group size; attrs "sum|prod|min|max <group>"
//   collective.broadcast       same shape; attrs "<root rank> <group>"
//   collective.all_to_all      same shape, axis 0 in group-size blocks; attrs "<group>"
//   collective.send            same shape (its value is x, once sent); attrs "<to> <tag> <group>"
//   collective.recv_like       the shape and dtype of its input (whose values are not
//                              read), filled from a message; attrs "<from> <tag> <group>"
#pragma once

#include <memory>
#include <string>

#include "rlx/core/array.h"
#include "rlx/transport/transport.h"

namespace rlx::distributed {

// Registers the collective.* ops (idempotent; rlx::init calls it).
void register_collective_ops();
// Registers collective.send and collective.recv_like (idempotent; send and
// recv_like call it).
void register_point_to_point_ops();

// The group that ops with group id 0 (and calls without a group) use.
void set_default_group(std::shared_ptr<Transport> group);

// A stable id for `group`, to put in an op's attributes. The group is held
// weakly: it still closes when its last handle goes, and an op that runs
// after that fails naming it (ids are never reused).
int group_id(const std::shared_ptr<Transport>& group);

// Attributes for the collective ops: "sum 0".
std::string collective_attrs(ReduceOp op, int group);

// Lazy collectives. `group` defaults to the default group; on a group of one
// they return `x` itself (nothing to communicate). Shape errors are thrown
// here, when the op is built.
Array all_sum(const Array& x, std::shared_ptr<Transport> group = nullptr);
Array all_reduce(const Array& x, ReduceOp op, std::shared_ptr<Transport> group = nullptr);
// Concatenates every rank's x along axis 0, in rank order.
Array all_gather(const Array& x, std::shared_ptr<Transport> group = nullptr);
// Reduces x across ranks and returns this rank's slice of axis 0 (whose
// length must divide by the group size): rows [rank * m, (rank + 1) * m).
Array reduce_scatter(const Array& x, ReduceOp op = ReduceOp::sum,
                     std::shared_ptr<Transport> group = nullptr);
// Rank `root`'s x on every rank (the same shape and dtype on every rank).
Array broadcast(const Array& x, int root, std::shared_ptr<Transport> group = nullptr);
// Axis 0 cut into group-size blocks: block j goes to rank j, and block i of
// the result is what rank i sent this rank (mixture-of-experts routing).
Array all_to_all(const Array& x, std::shared_ptr<Transport> group = nullptr);
// Point-to-point inside the graph, as MLX's send and recv_like: send's value
// is x, and evaluating it sends x's bytes to rank `to` (send_bytes: it does
// not wait for the receiver); recv_like's is an array of like's shape and
// dtype filled with the next message from rank `from` with `tag` (like's
// values are not read). The message must be exactly that size (else
// mismatch). Pipeline stages pass activations this way.
Array send(const Array& x, int to, Tag tag = 0, std::shared_ptr<Transport> group = nullptr);
Array recv_like(const Array& like, int from, Tag tag = 0,
                std::shared_ptr<Transport> group = nullptr);

}  // namespace rlx::distributed
