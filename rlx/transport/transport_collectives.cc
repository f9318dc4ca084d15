// Transport's collectives, blocking and not: the checks every backend shares,
// the one-rank group's answers, then the backend's do_* in issue order.
#include <algorithm>
#include <cstring>

#include "rlx/transport/transport.h"

namespace rlx {
namespace {

// The group of one's answer to the gathering and scattering collectives.
Request copy_if_apart(const void* from, void* to, std::size_t bytes) {
  if (bytes > 0 && from != to) std::memmove(to, from, bytes);
  return {};
}

}  // namespace

void Transport::check_blocks(std::string_view operation, ConstElementSpan input, ElementSpan output,
                             bool gathers) const {
  check_elements(operation, input.data, input.count, input.dtype);
  check_elements(operation, output.data, output.count, output.dtype);
  // Built only for an error: formatting costs more than a small collective.
  const auto sizes = [&] {
    return "input " + describe_elements(input.count, input.dtype) + ", output " +
           describe_elements(output.count, output.dtype);
  };
  if (input.dtype != output.dtype) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation, -1, sizes()),
                          "input and output dtypes differ");
  }
  const std::size_t block = gathers ? input.count : output.count;
  const std::size_t blocks = gathers ? output.count : input.count;
  if (blocks / static_cast<std::size_t>(world_size_) != block ||
      blocks % static_cast<std::size_t>(world_size_) != 0) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation, -1, sizes()),
                          std::string(gathers ? "the output" : "the input") +
                              " must hold world_size x " + (gathers ? "input" : "output") +
                              " elements (" + std::to_string(world_size_) + " x " +
                              std::to_string(block) + ")");
  }
}

void Transport::check_all_to_all(ConstElementSpan input, ElementSpan output) const {
  check_elements("all_to_all", input.data, input.count, input.dtype);
  check_elements("all_to_all", output.data, output.count, output.dtype);
  const auto sizes = [&] {
    return "input " + describe_elements(input.count, input.dtype) + ", output " +
           describe_elements(output.count, output.dtype);
  };
  if (input.dtype != output.dtype || input.count != output.count) {
    throw CollectiveError(ErrorKind::invalid_argument, site("all_to_all", -1, sizes()),
                          "input and output must hold the same number of elements of one dtype");
  }
  if (input.count % static_cast<std::size_t>(world_size_) != 0) {
    throw CollectiveError(ErrorKind::invalid_argument, site("all_to_all", -1, sizes()),
                          "the input must hold world_size (" + std::to_string(world_size_) +
                              ") blocks of equal size");
  }
  const auto* in = static_cast<const std::byte*>(input.data);
  const auto* out = static_cast<const std::byte*>(output.data);
  const std::size_t bytes = input.bytes();
  if (bytes > 0 && in != out && in < out + bytes && out < in + bytes) {
    throw CollectiveError(ErrorKind::invalid_argument, site("all_to_all", -1, sizes()),
                          "input and output overlap without being the same buffer",
                          "pass one buffer as both (in place) or two separate ones");
  }
}

void Transport::check_all_reduce(ElementSpan data, ReduceOp op) const {
  check_elements("all_reduce", data.data, data.count, data.dtype);
  check_op("all_reduce", op);
}

void Transport::all_reduce(ElementSpan data, ReduceOp op) {
  start_all_reduce(data, op, Mode::blocking);
}
Request Transport::iall_reduce(ElementSpan data, ReduceOp op) {
  return start_all_reduce(data, op, Mode::background);
}
Request Transport::start_all_reduce(ElementSpan data, ReduceOp op, Mode mode) {
  check_all_reduce(data, op);
  if (world_size_ == 1) return {};
  return start(mode, {"all_reduce", data.count, data.dtype, static_cast<int>(op)},
               [this, data, op] { do_all_reduce(data, op); });
}

void Transport::all_gather(ConstElementSpan input, ElementSpan output) {
  start_all_gather(input, output, Mode::blocking);
}
Request Transport::iall_gather(ConstElementSpan input, ElementSpan output) {
  return start_all_gather(input, output, Mode::background);
}
Request Transport::start_all_gather(ConstElementSpan input, ElementSpan output, Mode mode) {
  check_blocks("all_gather", input, output, /*gathers=*/true);
  if (world_size_ == 1) return copy_if_apart(input.data, output.data, input.bytes());
  return start(mode, {"all_gather", input.count, input.dtype},
               [this, input, output] { do_all_gather(input, output); });
}

void Transport::reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) {
  start_reduce_scatter(input, output, op, Mode::blocking);
}
Request Transport::ireduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) {
  return start_reduce_scatter(input, output, op, Mode::background);
}
Request Transport::start_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op,
                                        Mode mode) {
  check_blocks("reduce_scatter", input, output, /*gathers=*/false);
  check_op("reduce_scatter", op);
  if (world_size_ == 1) return copy_if_apart(input.data, output.data, output.bytes());
  return start(mode, {"reduce_scatter", input.count, input.dtype, static_cast<int>(op)},
               [this, input, output, op] { do_reduce_scatter(input, output, op); });
}

void Transport::broadcast(ElementSpan data, int root) {
  start_broadcast(data, root, Mode::blocking);
}
Request Transport::ibroadcast(ElementSpan data, int root) {
  return start_broadcast(data, root, Mode::background);
}
Request Transport::start_broadcast(ElementSpan data, int root, Mode mode) {
  check_elements("broadcast", data.data, data.count, data.dtype);
  check_peer(root, "broadcast");
  if (world_size_ == 1) return {};
  return start(mode, {"broadcast", data.count, data.dtype, -1, root},
               [this, data, root] { do_broadcast(data, root); });
}

void Transport::all_to_all(ConstElementSpan input, ElementSpan output) {
  start_all_to_all(input, output, Mode::blocking);
}
Request Transport::iall_to_all(ConstElementSpan input, ElementSpan output) {
  return start_all_to_all(input, output, Mode::background);
}
Request Transport::start_all_to_all(ConstElementSpan input, ElementSpan output, Mode mode) {
  check_all_to_all(input, output);
  if (world_size_ == 1) return copy_if_apart(input.data, output.data, input.bytes());
  return start(mode, {"all_to_all", input.count, input.dtype},
               [this, input, output] { do_all_to_all(input, output); });
}

void Transport::check_counts(std::string_view operation, std::span<const std::size_t> counts,
                             std::size_t total, std::string_view what) const {
  if (counts.size() != static_cast<std::size_t>(world_size_)) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation),
                          std::string(what) + " has " + std::to_string(counts.size()) +
                              " entries; it needs one per rank (" + std::to_string(world_size_) +
                              ")");
  }
  std::size_t sum = 0;
  for (std::size_t count : counts) {
    if (__builtin_add_overflow(sum, count, &sum)) {
      throw CollectiveError(ErrorKind::invalid_argument, site(operation),
                            "the sum of " + std::string(what) + " overflows size_t");
    }
  }
  if (sum != total) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation),
                          std::string(what) + " add up to " + std::to_string(sum) +
                              " elements but the buffer holds " + std::to_string(total));
  }
}

namespace {

bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto* x = static_cast<const std::byte*>(a);
  const auto* y = static_cast<const std::byte*>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

}  // namespace

void Transport::check_two_sides(std::string_view operation, ConstElementSpan input,
                                ElementSpan output) const {
  check_elements(operation, input.data, input.count, input.dtype);
  check_elements(operation, output.data, output.count, output.dtype);
  if (input.dtype != output.dtype) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation),
                          "input and output dtypes differ");
  }
}

void Transport::check_all_gather_v(ConstElementSpan input, ElementSpan output,
                                   std::span<const std::size_t> counts) const {
  check_two_sides("all_gather_v", input, output);
  check_counts("all_gather_v", counts, output.count, "counts");
  const std::size_t mine = counts[static_cast<std::size_t>(rank_)];
  if (input.count != mine) {
    throw CollectiveError(ErrorKind::invalid_argument, site("all_gather_v"),
                          "the input holds " + std::to_string(input.count) +
                              " elements but counts[" + std::to_string(rank_) + "] is " +
                              std::to_string(mine));
  }
  std::size_t before = 0;
  for (int r = 0; r < rank_; ++r) before += counts[static_cast<std::size_t>(r)];
  const auto* own = static_cast<const std::byte*>(output.data) + before * size_of(output.dtype);
  if (input.data != own && overlap(input.data, input.bytes(), output.data, output.bytes())) {
    throw CollectiveError(ErrorKind::invalid_argument, site("all_gather_v"),
                          "input and output overlap, but the input is not this rank's part of "
                          "the output",
                          "pass separate buffers, or the input in its place in the output");
  }
}

void Transport::check_all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                                   ElementSpan output,
                                   std::span<const std::size_t> recv_counts) const {
  check_two_sides("all_to_all_v", input, output);
  check_counts("all_to_all_v", send_counts, input.count, "send_counts");
  check_counts("all_to_all_v", recv_counts, output.count, "recv_counts");
  const std::size_t own = send_counts[static_cast<std::size_t>(rank_)];
  if (own != recv_counts[static_cast<std::size_t>(rank_)]) {
    throw CollectiveError(ErrorKind::invalid_argument, site("all_to_all_v"),
                          "this rank sends itself " + std::to_string(own) +
                              " elements but expects " +
                              std::to_string(recv_counts[static_cast<std::size_t>(rank_)]));
  }
  if (overlap(input.data, input.bytes(), output.data, output.bytes())) {
    throw CollectiveError(ErrorKind::invalid_argument, site("all_to_all_v"),
                          "input and output overlap", "pass two separate buffers");
  }
}

void Transport::all_gather_v(ConstElementSpan input, ElementSpan output,
                             std::span<const std::size_t> counts) {
  start_all_gather_v(input, output, counts, Mode::blocking);
}
Request Transport::iall_gather_v(ConstElementSpan input, ElementSpan output,
                                 std::span<const std::size_t> counts) {
  return start_all_gather_v(input, output, counts, Mode::background);
}
Request Transport::start_all_gather_v(ConstElementSpan input, ElementSpan output,
                                      std::span<const std::size_t> counts, Mode mode) {
  check_all_gather_v(input, output, counts);
  if (world_size_ == 1) return copy_if_apart(input.data, output.data, input.bytes());
  return start(mode, {"all_gather_v", input.count, input.dtype},
               [this, input, output, counts] { do_all_gather_v(input, output, counts); });
}

void Transport::all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                             ElementSpan output, std::span<const std::size_t> recv_counts) {
  start_all_to_all_v(input, send_counts, output, recv_counts, Mode::blocking);
}
Request Transport::iall_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                                 ElementSpan output, std::span<const std::size_t> recv_counts) {
  return start_all_to_all_v(input, send_counts, output, recv_counts, Mode::background);
}
Request Transport::start_all_to_all_v(ConstElementSpan input,
                                      std::span<const std::size_t> send_counts, ElementSpan output,
                                      std::span<const std::size_t> recv_counts, Mode mode) {
  check_all_to_all_v(input, send_counts, output, recv_counts);
  if (world_size_ == 1) return copy_if_apart(input.data, output.data, input.bytes());
  return start(mode, {"all_to_all_v", input.count, input.dtype},
               [this, input, send_counts, output, recv_counts] {
                 do_all_to_all_v(input, send_counts, output, recv_counts);
               });
}

void Transport::check_rooted_blocks(std::string_view operation, ConstElementSpan input,
                                    ElementSpan output, int root, bool gathers) const {
  check_peer(root, operation);
  if (rank_ == root) return check_blocks(operation, input, output, gathers);
  const ConstElementSpan mine = gathers ? input : ConstElementSpan(output);
  check_elements(operation, mine.data, mine.count, mine.dtype);
}

void Transport::reduce(ElementSpan data, ReduceOp op, int root) {
  start_reduce(data, op, root, Mode::blocking);
}
Request Transport::ireduce(ElementSpan data, ReduceOp op, int root) {
  return start_reduce(data, op, root, Mode::background);
}
Request Transport::start_reduce(ElementSpan data, ReduceOp op, int root, Mode mode) {
  check_elements("reduce", data.data, data.count, data.dtype);
  check_op("reduce", op);
  check_peer(root, "reduce");
  if (world_size_ == 1) return {};
  return start(mode, {"reduce", data.count, data.dtype, static_cast<int>(op), root},
               [this, data, op, root] { do_reduce(data, op, root); });
}

void Transport::gather(ConstElementSpan input, ElementSpan output, int root) {
  start_gather(input, output, root, Mode::blocking);
}
Request Transport::igather(ConstElementSpan input, ElementSpan output, int root) {
  return start_gather(input, output, root, Mode::background);
}
Request Transport::start_gather(ConstElementSpan input, ElementSpan output, int root, Mode mode) {
  check_rooted_blocks("gather", input, output, root, /*gathers=*/true);
  if (rank_ != root) output = {nullptr, 0, input.dtype};
  if (world_size_ == 1) return copy_if_apart(input.data, output.data, input.bytes());
  return start(mode, {"gather", input.count, input.dtype, -1, root},
               [this, input, output, root] { do_gather(input, output, root); });
}

void Transport::scatter(ConstElementSpan input, ElementSpan output, int root) {
  start_scatter(input, output, root, Mode::blocking);
}
Request Transport::iscatter(ConstElementSpan input, ElementSpan output, int root) {
  return start_scatter(input, output, root, Mode::background);
}
Request Transport::start_scatter(ConstElementSpan input, ElementSpan output, int root, Mode mode) {
  check_rooted_blocks("scatter", input, output, root, /*gathers=*/false);
  if (rank_ != root) input = {nullptr, 0, output.dtype};
  if (world_size_ == 1) return copy_if_apart(input.data, output.data, output.bytes());
  return start(mode, {"scatter", output.count, output.dtype, -1, root},
               [this, input, output, root] { do_scatter(input, output, root); });
}

void Transport::barrier() { start_barrier(Mode::blocking); }
Request Transport::ibarrier() { return start_barrier(Mode::background); }
Request Transport::start_barrier(Mode mode) {
  if (world_size_ == 1) return {};
  return start(mode, {"barrier"}, [this] { do_barrier(); });
}

std::shared_ptr<Transport> Transport::split(int color, int key) {
  if (color < kNoColor) {
    throw CollectiveError(ErrorKind::invalid_argument, site("split"),
                          "color " + std::to_string(color) + " is below kNoColor (-1)",
                          "colors are 0 or more; kNoColor leaves this rank out");
  }
  const std::int64_t mine[] = {color, key};
  std::vector<std::int64_t> all(2 * static_cast<std::size_t>(world_size_));
  all_gather(std::span<const std::int64_t>(mine), std::span(all));
  SplitPlan plan{.color = color, .number = splits_++};
  if (color != kNoColor) {
    std::vector<std::pair<std::int64_t, int>> same;  // (key, rank here)
    for (int r = 0; r < world_size_; ++r) {
      const auto at = 2 * static_cast<std::size_t>(r);
      if (all[at] == color) same.emplace_back(all[at + 1], r);
    }
    std::sort(same.begin(), same.end());
    for (const auto& [member_key, member] : same) {
      if (member == rank_) plan.rank = static_cast<int>(plan.members.size());
      plan.members.push_back(member);
    }
  }
  try {
    const CallRecord::SplitScope recorded_as(
        record_group_, std::to_string(plan.number) + ":" + std::to_string(color), plan.members);
    return do_split(plan);
  } catch (const CollectiveError& error) {
    // What failed before the new group knew its ranks (its event loop, its
    // latch) is told from this group's rank.
    if (error.rank() < 0) throw error.seen_from(site("split"));
    throw;
  }
}

}  // namespace rlx
