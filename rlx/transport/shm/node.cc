#include "rlx/transport/shm/node.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace rlx::shm {

bool NodeShape::fits_line(std::size_t bytes) {
  return bytes <= kCallLineBytes - CallLine::kInlineOffset;
}

std::size_t NodeShape::ring_offset(int from) const {
  return payloads_offset() + static_cast<std::size_t>(kPayloadSlots) * call_bytes +
         static_cast<std::size_t>(from) * MessageRing::footprint(ring_capacity);
}

std::size_t NodeShape::staging_offset() const { return ring_offset(local_size); }

std::size_t NodeShape::segment_bytes() const {
  return staging_offset() + static_cast<std::size_t>(slots) * slot_bytes;
}

Node::Node(NodeShape shape, int local_rank, std::vector<int> world_ranks,
           std::vector<SharedSegment> segments)
    : shape_(shape),
      local_rank_(local_rank),
      world_ranks_(std::move(world_ranks)),
      segments_(std::move(segments)) {}

SharedSegment Node::create_own(const std::string& directory, const std::string& name,
                               const NodeShape& shape, const ErrorSite& site) {
  SharedSegment segment = SharedSegment::create(directory, name, shape.segment_bytes(), site);
  std::byte* base = segment.data();
  new (base) RankControl{};
  for (int line = 0; line < NodeShape::kCallSlots; ++line) {
    new (base + NodeShape::kControlBytes +
         static_cast<std::size_t>(line) * NodeShape::kCallLineBytes) CallLine{};
  }
  for (int from = 0; from < shape.local_size; ++from) {
    MessageRing::create(base + shape.ring_offset(from), shape.ring_capacity);
  }
  return segment;
}

int Node::local_of(int rank) const {
  const auto it = std::find(world_ranks_.begin(), world_ranks_.end(), rank);
  return it == world_ranks_.end() ? -1 : static_cast<int>(it - world_ranks_.begin());
}

std::byte* Node::call_payload(int local, std::uint64_t call_number, std::size_t bytes) const {
  if (NodeShape::fits_line(bytes)) {
    return reinterpret_cast<std::byte*>(&call_line(local, call_number)) + CallLine::kInlineOffset;
  }
  if (bytes <= NodeShape::kSmallPayloadBytes) {
    const auto slot = static_cast<std::size_t>(call_number % NodeShape::kCallSlots);
    return base(local) + NodeShape::small_payloads_offset() + slot * NodeShape::kSmallPayloadBytes;
  }
  if (bytes <= NodeShape::kMidPayloadBytes) {
    const auto slot = static_cast<std::size_t>(call_number % NodeShape::kMidPayloadSlots);
    return base(local) + NodeShape::mid_payloads_offset() + slot * NodeShape::kMidPayloadBytes;
  }
  const auto slot = static_cast<std::size_t>(call_number % NodeShape::kPayloadSlots);
  return base(local) + NodeShape::payloads_offset() + slot * shape_.call_bytes;
}

MessageRing Node::ring(int from, int to) const {
  return MessageRing::attach(base(to) + shape_.ring_offset(from), shape_.ring_capacity);
}

std::byte* Node::staging(int local, std::uint64_t ticket) const {
  const auto slot = static_cast<std::size_t>(ticket % static_cast<std::uint64_t>(shape_.slots));
  return base(local) + shape_.staging_offset() + slot * shape_.slot_bytes;
}

void Node::announce_close() const {
  control(local_rank_).closed.store(1, std::memory_order_seq_cst);
  for (int local = 0; local < local_size(); ++local) {
    if (local == local_rank_) continue;
    control(local).bell.wake();
    control(local).drain_bell.wake();
  }
}

}  // namespace rlx::shm
