// Building blocks shared by the algorithms: element ranges, ring neighbours,
// and a fixed-capacity step (no allocation per call).
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "rlx/collectives/links.h"

namespace rlx {

// Most lanes a backend may offer; sub-rings are 2 x lanes at most.
inline constexpr int kMaxLanes = 8;

// Elements [begin, end).
struct ElementRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
};

// Part `i` of `count` elements cut into `parts` near-equal parts (the first
// count % parts parts get one more). Parts may be empty.
constexpr ElementRange split_range(std::size_t count, std::size_t parts, std::size_t i) {
  const std::size_t base = count / parts, extra = count % parts;
  const std::size_t begin = i * base + (i < extra ? i : extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

// The bytes of elements `range` (relative to `offset`) of a typed buffer.
inline std::span<std::byte> bytes_of(ElementSpan data, std::size_t offset, ElementRange range) {
  const std::size_t element = size_of(data.dtype);
  return {static_cast<std::byte*>(data.data) + (offset + range.begin) * element,
          range.size() * element};
}

// Where rank `rank`'s block starts when the blocks of `counts` elements lie
// in rank order (the uneven collectives).
inline std::size_t elements_before(std::span<const std::size_t> counts, int rank) {
  std::size_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += counts[static_cast<std::size_t>(r)];
  return offset;
}

constexpr int ring_mod(long long value, int n) { return static_cast<int>(((value % n) + n) % n); }

// One direction of a ring, seen from one rank: ring position `v` sends to the
// position after it. Direction 0 is rank order; direction 1 is reversed.
struct RingView {
  int n = 1;
  int rank = 0;
  int direction = 0;

  int position() const { return direction == 0 ? rank : ring_mod(-rank, n); }
  int rank_at(long long position) const {
    const int p = ring_mod(position, n);
    return direction == 0 ? p : ring_mod(-p, n);
  }
  int right() const { return rank_at(position() + 1); }
  int left() const { return rank_at(position() - 1); }
};

// The sends and receives of one step, built up and then run.
class Step {
 public:
  static constexpr std::size_t kCapacity = 64;

  void send(int peer, int lane, std::span<const std::byte> bytes);
  void recv(int peer, int lane, std::span<std::byte> into, bool reduce);
  // Runs the step through `links` and empties it.
  void run(Links& links, const CollectiveCall& call, std::uint32_t step);

 private:
  std::array<StepSend, kCapacity> sends_;
  std::array<StepRecv, kCapacity> recvs_;
  std::size_t num_sends_ = 0;
  std::size_t num_recvs_ = 0;
};

}  // namespace rlx
