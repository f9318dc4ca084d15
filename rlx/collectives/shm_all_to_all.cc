// All-to-all among the ranks of one host: through the call lines when the
// whole input fits inline, else pipelined: per chunk, each rank stages the
// chunk of every block it sends and each rank copies its own block's chunk
// out of every peer's slot. Chunk c of every block is staged before chunk c
// of the output is written, so in place needs no extra copy.
#include <cstring>

#include "rlx/collectives/shm_collectives.h"
#include "rlx/transport/shm/stream_copy.h"

namespace rlx {

void ShmCollectives::all_to_all(const CollectiveCall& call, ConstElementSpan input,
                                ElementSpan output) {
  const auto* in = static_cast<const std::byte*>(input.data);
  auto* out = static_cast<std::byte*>(output.data);
  const std::size_t block = call.count * size_of(call.dtype);
  const int me = local_rank(), n = local_size();
  if (fits_inline(input.bytes())) {
    const std::uint64_t number = open_call(call, {in, input.bytes()});
    for (int j = 0; j < n; ++j) {
      if (block == 0 || (j == me && in == out)) continue;
      const std::byte* from = j == me ? in + static_cast<std::size_t>(me) * block
                                      : node_.call_payload(j, number, input.bytes()) +
                                            static_cast<std::size_t>(me) * block;
      std::memcpy(out + static_cast<std::size_t>(j) * block, from, block);
    }
    return;
  }
  open_call(call, {});
  exchange_pipelined(call, in, out, block);
}

void ShmCollectives::exchange_pipelined(const CollectiveCall& call, const std::byte* in,
                                        std::byte* out, std::size_t block) {
  const int me = local_rank(), n = local_size();
  const std::size_t element = size_of(call.dtype);
  const std::size_t piece =
      node_.shape().slot_bytes / static_cast<std::size_t>(n) / element * element;
  const bool streaming = shm::worth_streaming(block * static_cast<std::size_t>(n));
  const auto at = [&](int j) { return static_cast<std::size_t>(j) * block; };
  for (std::size_t offset = 0; offset < block; offset += piece) {
    const std::size_t length = std::min(piece, block - offset);
    const std::uint64_t ticket = take_ticket(call);
    std::byte* slot = node_.staging(me, ticket);
    for (int j = 0; j < n; ++j) {
      if (j != me)
        std::memcpy(slot + static_cast<std::size_t>(j) * piece, in + at(j) + offset, length);
    }
    publish(Phase::staged, ticket);
    if (in != out)
      shm::write_result(out + at(me) + offset, in + at(me) + offset, length, streaming);
    for (int j = 0; j < n; ++j) {
      if (j == me) continue;
      wait_for(j, Phase::staged, ticket, call);
      shm::write_result(out + at(j) + offset,
                        node_.staging(j, ticket) + static_cast<std::size_t>(me) * piece, length,
                        streaming);
    }
    publish(Phase::done, ticket);
  }
}

}  // namespace rlx
