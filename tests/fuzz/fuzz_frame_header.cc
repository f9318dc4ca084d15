// libFuzzer target: the 40-byte frame header every TCP message starts with.
// Any input must decode or throw wire::DecodeError; a header that decodes
// must encode back to the same bytes (nothing is accepted loosely).
#include <cstdlib>
#include <cstring>

#include "rlx/transport/frame.h"
#include "rlx/transport/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < rlx::wire::kFrameHeaderBytes) return 0;
  const auto bytes = std::span<const std::byte, rlx::wire::kFrameHeaderBytes>(
      reinterpret_cast<const std::byte*>(data), rlx::wire::kFrameHeaderBytes);
  try {
    const rlx::wire::FrameHeader header = rlx::wire::decode(bytes);
    const rlx::wire::EncodedHeader again = rlx::wire::encode(header);
    if (std::memcmp(again.data(), data, again.size()) != 0) std::abort();
  } catch (const rlx::wire::DecodeError&) {
  }
  return 0;
}
