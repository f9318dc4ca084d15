// libFuzzer target: the connection handshake's Hello and Challenge, and the
// acceptor's refusal rules applied to any Hello that decodes.
#include "rlx/transport/handshake.h"
#include "rlx/transport/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rlx::wire;
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  try {
    if (size >= kHelloBytes) {
      const Hello hello = decode_hello(std::span<const std::byte, kHelloBytes>(bytes, kHelloBytes));
      (void)refusal_reason(hello, 1, 4, 2);
      (void)refusal_reason(hello, 0, 1, 0);
    }
  } catch (const rlx::wire::DecodeError&) {
  }
  try {
    if (size >= kChallengeBytes) {
      (void)decode_challenge(std::span<const std::byte, kChallengeBytes>(bytes, kChallengeBytes));
    }
  } catch (const rlx::wire::DecodeError&) {
  }
  return 0;
}
