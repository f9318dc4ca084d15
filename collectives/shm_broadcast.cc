// Broadcast among the ranks of one host: the root's data rides inline in its
// call line when it fits, else streams through the root's staging slots.
#include <cstring>

#include "collectives/shm_collectives.h"

namespace rlx {

void ShmCollectives::broadcast(const CollectiveCall& call, ElementSpan data, int root) {
  auto* bytes = static_cast<std::byte*>(data.data);
  const bool is_root = local_rank() == root;
  log_choice(call, data.bytes(), fits_inline(data.bytes()));
  if (fits_inline(data.bytes())) {
    const std::uint64_t number =
        open_call(call, is_root ? std::span<const std::byte>(bytes, data.bytes())
                                : std::span<const std::byte>());
    if (!is_root && data.count > 0) {
      std::memcpy(bytes, node_.call_payload(root, number), data.bytes());
    }
    return;
  }
  open_call(call, {});
  const std::size_t slot = node_.shape().slot_bytes;
  for (std::size_t offset = 0; offset < data.bytes(); offset += slot) {
    const std::size_t length = std::min(slot, data.bytes() - offset);
    const std::uint64_t ticket = take_ticket(call);
    if (is_root) {
      std::memcpy(node_.staging(root, ticket), bytes + offset, length);
      publish(Phase::staged, ticket);
    } else {
      wait_for(root, Phase::staged, ticket, call);
      std::memcpy(bytes + offset, node_.staging(root, ticket), length);
    }
    publish(Phase::done, ticket);
  }
}

}  // namespace rlx
