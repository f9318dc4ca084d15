// How a CollectiveCall is written where another process reads it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "rlx/transport/collective_call.h"

namespace rlx {

// The one encoding of a call, all but its sequence (each path numbers its
// calls itself): TCP's and verbs' frame headers, shared memory's call lines
// and the MPI backend's diagnosis carry these bytes. Little-endian: kind, op,
// dtype (a byte each), root + 1 (u32; 0: no root), count (u64).
inline constexpr std::size_t kEncodedCallBytes = 15;
using EncodedCall = std::array<std::byte, kEncodedCallBytes>;

EncodedCall encode_call(const CollectiveCall& call);

// The call `bytes` encode, numbered `sequence`; empty when a field is out of
// range (bytes another process wrote are not trusted: a corrupt segment, a
// stranger's stream).
std::optional<CollectiveCall> decode_call(std::span<const std::byte, kEncodedCallBytes> bytes,
                                          std::uint64_t sequence);

}  // namespace rlx
