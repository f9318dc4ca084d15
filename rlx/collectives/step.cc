#include "rlx/collectives/step.h"

#include <stdexcept>

namespace rlx {

void Step::send(int peer, int lane, std::span<const std::byte> bytes) {
  if (num_sends_ == kCapacity) throw std::logic_error("collective step: too many sends");
  sends_[num_sends_++] = {peer, lane, bytes};
}

void Step::recv(int peer, int lane, std::span<std::byte> into, bool reduce) {
  if (num_recvs_ == kCapacity) throw std::logic_error("collective step: too many receives");
  recvs_[num_recvs_++] = {peer, lane, into, reduce};
}

void Step::run(Links& links, const CollectiveCall& call, std::uint32_t step) {
  links.exchange(call, step, {sends_.data(), num_sends_}, {recvs_.data(), num_recvs_});
  num_sends_ = num_recvs_ = 0;
}

}  // namespace rlx
