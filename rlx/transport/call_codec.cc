#include "rlx/transport/call_codec.h"

#include "rlx/transport/wire.h"

namespace rlx {
namespace {
// No group has this many ranks (launch_env caps the world below it).
constexpr std::uint32_t kRootLimit = std::uint32_t{1} << 30;
}  // namespace

EncodedCall encode_call(const CollectiveCall& call) {
  // Every small collective encodes its call: no writer's bounds check per byte.
  EncodedCall out;
  out[0] = static_cast<std::byte>(call.kind);
  out[1] = static_cast<std::byte>(call.op);
  out[2] = static_cast<std::byte>(call.dtype);
  wire::store_little_endian(&out[3], static_cast<std::uint32_t>(call.root + 1));
  wire::store_little_endian(&out[7], call.count);
  static_assert(kEncodedCallBytes == 7 + sizeof(call.count));
  return out;
}

std::optional<CollectiveCall> decode_call(std::span<const std::byte, kEncodedCallBytes> bytes,
                                          std::uint64_t sequence) {
  wire::ByteReader r(bytes);
  const std::uint8_t kind = r.u8(), op = r.u8(), dtype = r.u8();
  const std::uint32_t root_plus_one = r.u32();
  const std::uint64_t count = r.u64();
  const bool valid = kind >= static_cast<std::uint8_t>(CollectiveKind::all_reduce) &&
                     kind <= static_cast<std::uint8_t>(CollectiveKind::scatter) &&
                     op <= static_cast<std::uint8_t>(ReduceOp::max) && is_valid_dtype(dtype) &&
                     root_plus_one <= kRootLimit;
  if (!valid) return std::nullopt;
  return CollectiveCall{.kind = static_cast<CollectiveKind>(kind),
                        .op = static_cast<ReduceOp>(op),
                        .dtype = static_cast<Dtype>(dtype),
                        .count = count,
                        .sequence = sequence,
                        .root = static_cast<std::int32_t>(root_plus_one) - 1};
}

}  // namespace rlx
