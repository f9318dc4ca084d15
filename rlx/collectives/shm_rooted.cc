// Reduce, gather and scatter among the ranks of one host. Small ones ride
// inline in the call lines: one posted line per rank, then the root (every
// rank, for scatter) copies or reduces what it needs from the others'
// lines; a rank that needs nothing of the others (a non-root of reduce and
// gather, the root of scatter) posts and returns (shm_call_lines.cc).
// Larger reduces and gathers stream through the staging slots as all_reduce
// and all_gather do, with only the root gathering (a reduce of two ranks: the
// non-root stages, the root reduces, reduce_pair_pipelined); a larger
// scatter stays on the network algorithm.
#include <cstring>

#include "rlx/collectives/shm_collectives.h"

namespace rlx {

void ShmCollectives::reduce(const CollectiveCall& call, ElementSpan data) {
  const bool fits = fits_inline(data.bytes());
  auto* bytes = static_cast<std::byte*>(data.data);
  const int root = node_.local_of(call.root);
  const bool is_root = local_rank() == root;
  if (fits && !is_root) {
    defer_check(call, post_call(call, {bytes, data.bytes()}), root);
    return;
  }
  const std::uint64_t number = open_call(
      call, fits ? std::span<const std::byte>(bytes, data.bytes()) : std::span<const std::byte>());
  if (fits) {
    if (data.count == 0) return;
    // Every input from the call lines, this rank's too: the output is not one of them.
    return reduce_in_rank_order(data, call.op, [&](int j) {
      return ConstElementSpan{node_.call_payload(j, number, data.bytes()), data.count, data.dtype};
    });
  }
  if (local_size() == 2) return reduce_pair_pipelined(call, data, !is_root, is_root);
  // As all_reduce, but the others keep their data: their reduced blocks
  // stay in their slots, and only the root copies them out.
  const BlockSplit split{data.count, local_size()};
  std::byte* own_block = bytes + split.begin(local_rank()) * size_of(data.dtype);
  reduce_pipelined(call, bytes, is_root ? own_block : nullptr, is_root ? bytes : nullptr, split,
                   /*gathers=*/true);
}

void ShmCollectives::reduce_pair_pipelined(const CollectiveCall& call, ElementSpan data,
                                           bool stages, bool reduces) {
  const std::size_t element = size_of(data.dtype);
  const std::size_t piece = node_.shape().slot_bytes / element;
  const int other = 1 - local_rank();
  auto* bytes = static_cast<std::byte*>(data.data);
  for (std::size_t begin = 0; begin < data.count; begin += piece) {
    const std::size_t length = std::min(piece, data.count - begin);
    std::byte* at = bytes + begin * element;
    const std::uint64_t ticket = take_ticket(call);
    if (stages) {
      std::memcpy(node_.staging(local_rank(), ticket), at, length * element);
      publish(Phase::staged, ticket);
    }
    if (reduces) {
      wait_for(other, Phase::staged, ticket, call);
      const ElementSpan mine{at, length, data.dtype};
      const ConstElementSpan theirs{node_.staging(other, ticket), length, data.dtype};
      // In rank order, as every path reduces (min and max of a NaN depend on it).
      if (local_rank() == 0) {
        reduce_to(mine, mine, theirs, call.op);
      } else {
        reduce_to(mine, theirs, mine, call.op);
      }
    }
    publish(Phase::done, ticket);
  }
}

void ShmCollectives::gather(const CollectiveCall& call, ConstElementSpan input,
                            ElementSpan output) {
  const std::size_t block = input.bytes();
  const bool fits = fits_inline(block);
  const auto* in = static_cast<const std::byte*>(input.data);
  const int root = node_.local_of(call.root);
  const bool is_root = local_rank() == root;
  if (fits && !is_root) {
    defer_check(call, post_call(call, {in, block}), root);
    return;
  }
  const std::uint64_t number =
      open_call(call, fits ? std::span<const std::byte>(in, block) : std::span<const std::byte>());
  auto* out = static_cast<std::byte*>(output.data);
  if (!fits) {
    const BlockSplit split{input.count * static_cast<std::size_t>(local_size()), local_size()};
    return gather_pipelined(call, in, is_root ? out : nullptr, split, /*staged=*/!is_root);
  }
  if (block == 0) return;
  for (int j = 0; j < local_size(); ++j) {
    std::byte* to = out + static_cast<std::size_t>(node_.world_rank(j)) * block;
    if (j == local_rank()) {
      if (to != in) std::memmove(to, in, block);
    } else {
      std::memcpy(to, node_.call_payload(j, number, block), block);
    }
  }
}

bool ShmCollectives::scatter_inline(const CollectiveCall& call, ConstElementSpan input,
                                    ElementSpan output) {
  const std::size_t block = output.bytes();
  const std::size_t all = block * static_cast<std::size_t>(local_size());
  const bool fits = fits_inline(all);
  const int root = node_.local_of(call.root);
  const bool is_root = local_rank() == root;
  const auto* in = static_cast<const std::byte*>(input.data);
  if (!fits) {
    open_call(call, {});  // the network algorithm follows
    return false;
  }
  const std::size_t offset = static_cast<std::size_t>(node_.world_rank(local_rank())) * block;
  if (is_root) {
    defer_check(call, post_call(call, {in, all}), /*only_peer=*/-1);
    if (block > 0 && in + offset != output.data) std::memmove(output.data, in + offset, block);
    return true;
  }
  const std::uint64_t number = post_call(call, {});
  check_call_of(call, number, root);
  if (block > 0) std::memcpy(output.data, node_.call_payload(root, number, all) + offset, block);
  return true;
}

}  // namespace rlx
