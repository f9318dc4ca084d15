#include "rlx/collectives/array_collectives.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <sstream>
#include <vector>

#include "rlx/collectives/array_groups.h"
#include "rlx/core/compiled_graph.h"
#include "rlx/core/custom.h"
#include "rlx/core/registry.h"
#include "rlx/core/shape.h"

namespace rlx::distributed {
namespace {

constexpr const char* kAllReduce = "collective.all_reduce";
constexpr const char* kAllGather = "collective.all_gather";
constexpr const char* kReduceScatter = "collective.reduce_scatter";
constexpr const char* kBroadcast = "collective.broadcast";
constexpr const char* kAllToAll = "collective.all_to_all";

struct Attrs {
  ReduceOp op = ReduceOp::sum;
  int group = 0;
};

// "sum 0" for all_reduce; "0" for all_gather.
Attrs parse_attrs(std::string_view text, std::string_view op, bool with_reduction) {
  std::istringstream in{std::string(text)};
  Attrs attrs;
  std::string reduction;
  if (with_reduction) {
    in >> reduction;
    const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max};
    bool known = false;
    for (ReduceOp candidate : ops) {
      if (name_of(candidate) == reduction) {
        attrs.op = candidate;
        known = true;
      }
    }
    if (!known) {
      throw Error(std::string(op) + ": attributes '" + std::string(text) +
                  "': expected '<sum|prod|min|max> <group id>'");
    }
  }
  if (!(in >> attrs.group) || !(in >> std::ws).eof()) {
    throw Error(std::string(op) + ": attributes '" + std::string(text) + "': expected " +
                (with_reduction ? "'<sum|prod|min|max> <group id>'" : "'<group id>'"));
  }
  return attrs;
}

struct RootedAttrs {
  int root = 0;
  int group = 0;
};

// "<root> <group>" for broadcast; the root must be a rank of the group.
RootedAttrs parse_rooted_attrs(std::string_view text, std::string_view op) {
  std::istringstream in{std::string(text)};
  RootedAttrs attrs;
  if (!(in >> attrs.root >> attrs.group) || !(in >> std::ws).eof()) {
    throw Error(std::string(op) + ": attributes '" + std::string(text) +
                "': expected '<root rank> <group id>'");
  }
  const int size = group_at(attrs.group, op)->world_size();
  if (attrs.root < 0 || attrs.root >= size) {
    throw Error(std::string(op) + ": root " + std::to_string(attrs.root) +
                " is not a rank of group " + std::to_string(attrs.group) + " (size " +
                std::to_string(size) + ")");
  }
  return attrs;
}

ConstElementSpan elements_of(const Array& x) {
  return {x.raw_data(), static_cast<std::size_t>(x.size()), x.dtype()};
}

ElementSpan elements_of(Array& x) {
  return {x.raw_mutable_data(), static_cast<std::size_t>(x.size()), x.dtype()};
}

Shape gathered_shape(const Shape& shape, int world_size, std::string_view op) {
  if (shape.empty()) throw ShapeError(std::string(op) + ": a scalar has no axis 0 to gather along");
  Shape out = shape;
  out[0] *= world_size;
  return out;
}

Shape scattered_shape(const Shape& shape, int world_size, std::string_view op) {
  if (shape.empty() || shape[0] % world_size != 0) {
    throw ShapeError(std::string(op) + ": axis 0 of " + to_string(shape) +
                     " must divide by the group size " + std::to_string(world_size));
  }
  Shape out = shape;
  out[0] /= world_size;
  return out;
}

// Runs every item's all-reduce as one collective over a flat buffer, so many
// small arrays (the gradients of many small layers) pay one collective's
// latency. The buffer is kept per thread and reused.
void all_reduce_items(Transport& group, ReduceOp op, Dtype dtype,
                      std::span<const Primitive::BatchItem> items) {
  if (items.size() == 1) {  // in place on the output: one copy of the input
    Array& out = *items[0].output;
    if (out.nbytes() > 0)
      std::memcpy(out.raw_mutable_data(), items[0].inputs[0].raw_data(), out.nbytes());
    group.all_reduce(
        ElementSpan{out.raw_mutable_data(), static_cast<std::size_t>(out.size()), dtype}, op);
    return;
  }
  std::size_t total = 0;
  bool back_to_back = true;  // as a compiled graph lays a fused call's outputs out
  auto* const first = static_cast<std::byte*>(items[0].output->raw_mutable_data());
  for (const auto& item : items) {
    back_to_back = back_to_back && item.output->raw_mutable_data() == first + total;
    total += item.output->nbytes();
  }
  if (back_to_back) {  // in place: one copy of each input, none out
    for (const auto& item : items) {
      if (item.output->nbytes() > 0) {
        std::memcpy(item.output->raw_mutable_data(), item.inputs[0].raw_data(),
                    item.output->nbytes());
      }
    }
    group.all_reduce(ElementSpan{first, total / size_of(dtype), dtype}, op);
    return;
  }
  thread_local std::vector<std::byte> flat;
  if (flat.size() < total) flat.resize(total);
  std::size_t offset = 0;
  for (const auto& item : items) {
    const std::size_t bytes = item.output->nbytes();
    if (bytes > 0) std::memcpy(flat.data() + offset, item.inputs[0].raw_data(), bytes);
    offset += bytes;
  }
  group.all_reduce(ElementSpan{flat.data(), total / size_of(dtype), dtype}, op);
  offset = 0;
  for (const auto& item : items) {
    const std::size_t bytes = item.output->nbytes();
    if (bytes > 0) std::memcpy(item.output->raw_mutable_data(), flat.data() + offset, bytes);
    offset += bytes;
  }
}

Array all_reduce_kernel(std::span<const Array> inputs, std::string_view text) {
  const Attrs attrs = parse_attrs(text, kAllReduce, true);
  auto group = group_at(attrs.group, kAllReduce);
  const Array& x = inputs[0];
  if (group->world_size() == 1) return x;
  // Same key, same collective: arrays of one reduction, group and dtype fuse.
  std::string key = std::string(kAllReduce) + " " + collective_attrs(attrs.op, attrs.group) + " " +
                    std::string(name_of(x.dtype()));
  return make_batched_custom(kAllReduce, std::move(key), x.shape(), x.dtype(), {x},
                             [id = attrs.group, op = attrs.op,
                              dtype = x.dtype()](std::span<const Primitive::BatchItem> items) {
                               all_reduce_items(*group_at(id, kAllReduce), op, dtype, items);
                             });
}

Array all_gather_kernel(std::span<const Array> inputs, std::string_view text) {
  const Attrs attrs = parse_attrs(text, kAllGather, false);
  auto group = group_at(attrs.group, kAllGather);
  const Array& x = inputs[0];
  // Checked before the one-rank shortcut, so errors do not depend on the job's size.
  Shape shape = gathered_shape(x.shape(), group->world_size(), kAllGather);
  if (group->world_size() == 1) return x;
  return make_custom(
      kAllGather, std::move(shape), x.dtype(), {x},
      [id = attrs.group](std::span<const Array> in, Array& out) {
        group_at(id, kAllGather)
            ->all_gather(ConstElementSpan{in[0].raw_data(), static_cast<std::size_t>(in[0].size()),
                                          in[0].dtype()},
                         ElementSpan{out.raw_mutable_data(), static_cast<std::size_t>(out.size()),
                                     out.dtype()});
      });
}

Array reduce_scatter_kernel(std::span<const Array> inputs, std::string_view text) {
  const Attrs attrs = parse_attrs(text, kReduceScatter, true);
  auto group = group_at(attrs.group, kReduceScatter);
  const Array& x = inputs[0];
  Shape shape = scattered_shape(x.shape(), group->world_size(), kReduceScatter);
  if (group->world_size() == 1) return x;
  return make_custom(
      kReduceScatter, std::move(shape), x.dtype(), {x},
      [id = attrs.group, op = attrs.op](std::span<const Array> in, Array& out) {
        group_at(id, kReduceScatter)
            ->reduce_scatter(
                ConstElementSpan{in[0].raw_data(), static_cast<std::size_t>(in[0].size()),
                                 in[0].dtype()},
                ElementSpan{out.raw_mutable_data(), static_cast<std::size_t>(out.size()),
                            out.dtype()},
                op);
      });
}

Array broadcast_kernel(std::span<const Array> inputs, std::string_view text) {
  const RootedAttrs attrs = parse_rooted_attrs(text, kBroadcast);
  auto group = group_at(attrs.group, kBroadcast);
  const Array& x = inputs[0];
  if (group->world_size() == 1) return x;
  return make_custom(kBroadcast, x.shape(), x.dtype(), {x},
                     [id = attrs.group, root = attrs.root](std::span<const Array> in, Array& out) {
                       const auto live = group_at(id, kBroadcast);
                       if (out.nbytes() > 0) {
                         std::memcpy(out.raw_mutable_data(), in[0].raw_data(), out.nbytes());
                       }
                       live->broadcast(elements_of(out), root);
                     });
}

Array all_to_all_kernel(std::span<const Array> inputs, std::string_view text) {
  const Attrs attrs = parse_attrs(text, kAllToAll, false);
  auto group = group_at(attrs.group, kAllToAll);
  const Array& x = inputs[0];
  scattered_shape(x.shape(), group->world_size(), kAllToAll);  // axis 0 in equal blocks
  if (group->world_size() == 1) return x;
  return make_custom(kAllToAll, x.shape(), x.dtype(), {x},
                     [id = attrs.group](std::span<const Array> in, Array& out) {
                       group_at(id, kAllToAll)->all_to_all(elements_of(in[0]), elements_of(out));
                     });
}

Shape broadcast_shape(std::span<const Shape> inputs, std::string_view text) {
  parse_rooted_attrs(text, kBroadcast);
  return inputs[0];
}

Shape all_to_all_shape(std::span<const Shape> inputs, std::string_view text) {
  const Attrs attrs = parse_attrs(text, kAllToAll, false);
  scattered_shape(inputs[0], group_at(attrs.group, kAllToAll)->world_size(), kAllToAll);
  return inputs[0];
}

Shape reduce_scatter_shape(std::span<const Shape> inputs, std::string_view text) {
  const Attrs attrs = parse_attrs(text, kReduceScatter, true);
  return scattered_shape(inputs[0], group_at(attrs.group, kReduceScatter)->world_size(),
                         kReduceScatter);
}

Shape same_shape(std::span<const Shape> inputs, std::string_view text) {
  parse_attrs(text, kAllReduce, true);
  return inputs[0];
}

Shape all_gather_shape(std::span<const Shape> inputs, std::string_view text) {
  const Attrs attrs = parse_attrs(text, kAllGather, false);
  return gathered_shape(inputs[0], group_at(attrs.group, kAllGather)->world_size(), kAllGather);
}

// A group's collective calls as one compiled graph plans them.
struct GroupPlan {
  int group = 0;
  std::uint64_t fingerprint = 14695981039346656037ull;  // FNV-1a
  std::uint64_t calls = 0;
  std::size_t last_step = SIZE_MAX;

  void mix(std::string_view bytes) {
    for (char c : bytes)
      fingerprint = (fingerprint ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    fingerprint = (fingerprint ^ 0xff) * 1099511628211ull;
  }
};

// Every rank of a group must plan the same collective calls on it, in the
// same order and fused alike; otherwise one rank's fused all-reduce could
// add its gradients to another's different ones. Before a compiled graph's
// first run, the members of each group it uses gather a fingerprint of
// their calls on it, and all of them fail alike when one differs.
void check_collective_plan(std::span<const PlannedOp> ops) {
  std::vector<GroupPlan> groups;  // in the order the plan first calls them
  for (const PlannedOp& op : ops) {
    const std::string_view name = op.node->op;
    if (op.step == SIZE_MAX || !name.starts_with("collective.") || name == "collective.send" ||
        name == "collective.recv_like") {
      continue;
    }
    // The group id is the attributes' last word; ids are local, so the
    // fingerprint takes the words before it (the reduction, a root).
    std::istringstream words{op.node->attrs};
    std::vector<std::string> tokens{std::istream_iterator<std::string>(words), {}};
    if (tokens.empty()) continue;  // the op's own parser refused it at compile
    const int group = std::atoi(tokens.back().c_str());
    tokens.pop_back();
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const GroupPlan& g) { return g.group == group; });
    if (it == groups.end()) it = groups.insert(groups.end(), GroupPlan{.group = group});
    it->mix(name);
    for (const std::string& token : tokens) it->mix(token);
    it->mix(to_string(op.node->shape));
    it->mix(name_of(op.node->dtype));
    it->mix(op.step == it->last_step ? "fused" : "alone");
    it->last_step = op.step;
    ++it->calls;
  }
  // Every group's gather first, so that a rank failing on one group still
  // meets the others in theirs.
  std::vector<std::pair<std::shared_ptr<Transport>, std::string>> differing;
  for (const GroupPlan& plan : groups) {
    auto group = group_at(plan.group, "compile");
    const auto size = static_cast<std::size_t>(group->world_size());
    if (size == 1) continue;
    const std::int64_t mine[] = {static_cast<std::int64_t>(plan.fingerprint),
                                 static_cast<std::int64_t>(plan.calls)};
    std::vector<std::int64_t> all(2 * size);
    group->all_gather(ConstElementSpan{mine, 2, Dtype::i64},
                      ElementSpan{all.data(), all.size(), Dtype::i64});
    std::string differ;
    for (std::size_t r = 1; r < size; ++r) {
      if (all[2 * r] == all[0] && all[2 * r + 1] == all[1]) continue;
      differ += (differ.empty() ? "" : ", ") + std::to_string(r) + " (" +
                std::to_string(all[2 * r + 1]) + " calls)";
    }
    if (differ.empty()) continue;
    differing.emplace_back(
        std::move(group), "rank 0 plans " + std::to_string(all[1]) + " calls, and ranks " + differ);
  }
  if (differing.empty()) return;
  throw CollectiveError(
      ErrorKind::mismatch, differing[0].first->site("compiled graph's first run"),
      "the compiled graphs plan different collectives on this group: " + differing[0].second +
          " plan other calls, or the same in another order or fused otherwise",
      "build the same graph on every rank of the group: the same collective ops, in the same "
      "order, on arrays of the same shapes and dtypes, with the same batch_bytes_cap");
}

}  // namespace

void register_collective_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_op_extension({.name = kAllReduce, .num_inputs = 1, .infer_shape = same_shape});
    register_op_extension({.name = kAllGather, .num_inputs = 1, .infer_shape = all_gather_shape});
    register_array_kernel(kAllReduce, all_reduce_kernel);
    register_op_extension(
        {.name = kReduceScatter, .num_inputs = 1, .infer_shape = reduce_scatter_shape});
    register_array_kernel(kAllGather, all_gather_kernel);
    register_array_kernel(kReduceScatter, reduce_scatter_kernel);
    register_op_extension({.name = kBroadcast, .num_inputs = 1, .infer_shape = broadcast_shape});
    register_op_extension({.name = kAllToAll, .num_inputs = 1, .infer_shape = all_to_all_shape});
    register_array_kernel(kBroadcast, broadcast_kernel);
    register_array_kernel(kAllToAll, all_to_all_kernel);
    set_plan_check(check_collective_plan);
  });
}

std::string collective_attrs(ReduceOp op, int group) {
  return std::string(name_of(op)) + " " + std::to_string(group);
}

Array all_reduce(const Array& x, ReduceOp op, std::shared_ptr<Transport> group) {
  register_collective_ops();
  const int id = group ? group_id(group) : 0;
  const Array inputs[] = {x};
  return find_array_kernel(kAllReduce)->operator()(inputs, collective_attrs(op, id));
}

Array all_sum(const Array& x, std::shared_ptr<Transport> group) {
  return all_reduce(x, ReduceOp::sum, std::move(group));
}

Array all_gather(const Array& x, std::shared_ptr<Transport> group) {
  register_collective_ops();
  const int id = group ? group_id(group) : 0;
  const Array inputs[] = {x};
  return find_array_kernel(kAllGather)->operator()(inputs, std::to_string(id));
}

Array reduce_scatter(const Array& x, ReduceOp op, std::shared_ptr<Transport> group) {
  register_collective_ops();
  const int id = group ? group_id(group) : 0;
  const Array inputs[] = {x};
  return find_array_kernel(kReduceScatter)->operator()(inputs, collective_attrs(op, id));
}

Array broadcast(const Array& x, int root, std::shared_ptr<Transport> group) {
  register_collective_ops();
  const int id = group ? group_id(group) : 0;
  const Array inputs[] = {x};
  return find_array_kernel(kBroadcast)
      ->
      operator()(inputs, std::to_string(root) + " " + std::to_string(id));
}

Array all_to_all(const Array& x, std::shared_ptr<Transport> group) {
  register_collective_ops();
  const int id = group ? group_id(group) : 0;
  const Array inputs[] = {x};
  return find_array_kernel(kAllToAll)->operator()(inputs, std::to_string(id));
}

}  // namespace rlx::distributed
