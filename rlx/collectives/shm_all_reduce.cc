// All-reduce among the ranks of one host: one-shot through the call lines
// when the buffer fits inline, else a pipelined direct reduce-scatter and
// all-gather through the staging slots (shm_collectives.h); with two ranks,
// each reduces the other's staged pieces with its own (shm_rooted.cc).
#include <cstring>

#include "rlx/collectives/reduce.h"
#include "rlx/collectives/shm_collectives.h"
#include "rlx/transport/shm/stream_copy.h"

namespace rlx {

ShmCollectives::Piece ShmCollectives::piece_of(BlockSplit split, int part, std::size_t chunk,
                                               std::size_t piece) {
  const std::size_t length = split.length(part);
  const std::size_t offset = chunk * piece;
  if (offset >= length) return {split.begin(part), 0};
  return {split.begin(part) + offset, std::min(piece, length - offset)};
}

void ShmCollectives::reduce_pipelined(const CollectiveCall& call, const std::byte* in,
                                      std::byte* my_out, std::byte* gather_base, BlockSplit split,
                                      bool gathers) {
  const int n = local_size();
  const int me = local_rank();
  const std::size_t element = size_of(call.dtype);
  // Each slot holds a piece for every rank, 64-byte aligned.
  const std::size_t piece_bytes = (node_.shape().slot_bytes / static_cast<std::size_t>(n)) & ~63ul;
  const std::size_t piece = piece_bytes / element;
  const std::size_t chunks = (split.length(0) + piece - 1) / piece;  // block 0 is the longest
  // The results' last write: past the caches, without reading the lines first.
  const bool streaming = shm::worth_streaming(split.count * element);
  for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
    const std::uint64_t ticket = take_ticket(call);
    std::byte* mine = node_.staging(me, ticket);
    for (int j = 0; j < n; ++j) {
      const Piece p = piece_of(split, j, chunk, piece);
      if (j != me && p.length > 0) {
        std::memcpy(mine + j * piece_bytes, in + p.begin * element, p.length * element);
      }
    }
    publish(Phase::staged, ticket);
    wait_for_all(Phase::staged, ticket, call);
    const Piece own = piece_of(split, me, chunk, piece);
    if (own.length > 0) {
      const ElementSpan result{mine + me * piece_bytes, own.length, call.dtype};
      reduce_in_rank_order(result, call.op, [&](int j) {
        const std::byte* from =
            j == me ? in + own.begin * element : node_.staging(j, ticket) + me * piece_bytes;
        return ConstElementSpan{from, own.length, call.dtype};
      });
      if (my_out != nullptr) {
        shm::write_result(my_out + (own.begin - split.begin(me)) * element, result.data,
                          result.bytes(), streaming);
      }
    }
    if (gathers) publish(Phase::reduced, ticket);
    if (gather_base != nullptr) {
      for (int j = 0; j < n; ++j) {
        if (j == me) continue;
        wait_for(j, Phase::reduced, ticket, call);
        const Piece p = piece_of(split, j, chunk, piece);
        if (p.length > 0) {
          shm::write_result(gather_base + p.begin * element,
                            node_.staging(j, ticket) + j * piece_bytes, p.length * element,
                            streaming);
        }
      }
    }
    publish(Phase::done, ticket);
  }
}

void ShmCollectives::all_reduce(const CollectiveCall& call, ElementSpan data) {
  auto* bytes = static_cast<std::byte*>(data.data);
  if (fits_inline(data.bytes())) {
    const std::uint64_t number = open_call(call, {bytes, data.bytes()});
    if (data.count == 0) return;
    reduce_in_rank_order(data, call.op, [&](int j) {
      return ConstElementSpan{node_.call_payload(j, number, data.bytes()), data.count, data.dtype};
    });
    return;
  }
  open_call(call, {});
  if (local_size() == 2) return reduce_pair_pipelined(call, data, true, true);
  const BlockSplit split{data.count, local_size()};
  reduce_pipelined(call, bytes, bytes + split.begin(local_rank()) * size_of(data.dtype), bytes,
                   split, /*gathers=*/true);
}

void ShmCollectives::reduce_scatter_blocks(const CollectiveCall& call, ElementSpan data) {
  if (fits_inline(data.bytes())) return all_reduce(call, data);  // every block, at once
  open_call(call, {});
  auto* bytes = static_cast<std::byte*>(data.data);
  const BlockSplit split{data.count, local_size()};
  reduce_pipelined(call, bytes, bytes + split.begin(local_rank()) * size_of(data.dtype), nullptr,
                   split, /*gathers=*/false);
}

}  // namespace rlx
