#include "transport/transport.h"

#include <cstring>

namespace rlx {

std::string_view name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
  }
  return "invalid";
}

Transport::Transport(int rank, int world_size, std::string backend,
                     std::chrono::milliseconds timeout)
    : rank_(rank), world_size_(world_size), backend_(std::move(backend)), timeout_(timeout) {
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "create transport"},
                          "rank " + std::to_string(rank_) + " is outside a world of size " +
                              std::to_string(world_size_));
  }
}

ErrorSite Transport::site(std::string_view operation, int peer, std::string sizes) const {
  return {.rank = rank_,
          .world_size = world_size_,
          .peer = peer,
          .operation = std::string(operation),
          .sizes = std::move(sizes)};
}

void Transport::check_peer(int peer, std::string_view operation) const {
  if (peer < 0 || peer >= world_size_) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation),
                          "peer rank " + std::to_string(peer) + " does not exist",
                          "ranks are 0.." + std::to_string(world_size_ - 1));
  }
}

void Transport::check_tag(Tag tag, std::string_view operation) const {
  if (tag > kMaxTag) {
    throw CollectiveError(
        ErrorKind::invalid_argument, site(operation),
        "tag " + std::to_string(tag) + " is above the largest user tag " + std::to_string(kMaxTag));
  }
}

void Transport::send_bytes(int to, Tag tag, std::span<const std::byte> payload) {
  check_peer(to, "send_bytes");
  check_tag(tag, "send_bytes");
  do_send_bytes(to, tag, payload);
}

std::vector<std::byte> Transport::recv_bytes(int from, Tag tag) {
  check_peer(from, "recv_bytes");
  check_tag(tag, "recv_bytes");
  return do_recv_bytes(from, tag);
}

void Transport::all_reduce(ElementSpan data, ReduceOp op) {
  if (data.data == nullptr && data.count > 0) {
    throw CollectiveError(ErrorKind::invalid_argument,
                          site("all_reduce", -1, describe_elements(data.count, data.dtype)),
                          "the buffer is null");
  }
  if (world_size_ == 1) return;
  do_all_reduce(data, op);
}

void Transport::check_blocks(std::string_view operation, ConstElementSpan input, ElementSpan output,
                             bool gathers) const {
  const auto sizes = "input " + describe_elements(input.count, input.dtype) + ", output " +
                     describe_elements(output.count, output.dtype);
  if (input.dtype != output.dtype) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation, -1, sizes),
                          "input and output dtypes differ");
  }
  const std::size_t block = gathers ? input.count : output.count;
  if ((gathers ? output.count : input.count) != block * static_cast<std::size_t>(world_size_)) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation, -1, sizes),
                          std::string(gathers ? "the output" : "the input") +
                              " must hold world_size x " + (gathers ? "input" : "output") +
                              " elements (" + std::to_string(block * world_size_) + ")");
  }
  if ((input.data == nullptr || output.data == nullptr) && block > 0) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation, -1, sizes),
                          "a buffer is null");
  }
}

void Transport::all_gather(ConstElementSpan input, ElementSpan output) {
  check_blocks("all_gather", input, output, /*gathers=*/true);
  if (world_size_ == 1) {
    if (input.count > 0 && input.data != output.data) {
      std::memmove(output.data, input.data, input.bytes());
    }
    return;
  }
  do_all_gather(input, output);
}

void Transport::reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) {
  check_blocks("reduce_scatter", input, output, /*gathers=*/false);
  if (world_size_ == 1) {
    if (output.count > 0 && input.data != output.data) {
      std::memmove(output.data, input.data, output.bytes());
    }
    return;
  }
  do_reduce_scatter(input, output, op);
}

void Transport::barrier() {
  if (world_size_ == 1) return;
  do_barrier();
}

}  // namespace rlx
