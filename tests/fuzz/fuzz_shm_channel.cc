// libFuzzer target: what the same-host path reads from memory another
// process writes. The first 15 bytes are an encoded call (a call line's
// description: accepted only when every field is in range, then it must
// encode back to the same bytes and describe itself); the rest stands in a
// message ring as if a producer had written it, and the consumer takes
// messages from it until a header is refused (protocol_violation) or the
// bytes run out. Nothing may crash, hang or read outside the ring.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rlx/transport/call_codec.h"
#include "rlx/transport/shm/ring.h"

namespace {

void posted_call(const std::uint8_t* data) {
  rlx::EncodedCall posted;
  std::memcpy(posted.data(), data, posted.size());
  const auto call = rlx::decode_call(posted, 7);
  if (!call) return;
  if (rlx::encode_call(*call) != posted) std::abort();
  if (call->describe().empty()) std::abort();
}

void ring_contents(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kCapacity = 4096;
  alignas(64) static std::byte memory[4096 + kCapacity];
  std::memset(memory, 0, sizeof memory);
  rlx::shm::Doorbell bells[2];
  rlx::shm::MessageRing producer = rlx::shm::MessageRing::create(memory, kCapacity);
  rlx::shm::MessageRing consumer = rlx::shm::MessageRing::attach(memory, kCapacity);
  // The fuzzer's bytes go in as one message's payload; the consumer takes
  // that message's header only, so it reads the payload as what follows.
  rlx::shm::RingWait produce{
      .own = &bells[0], .other = &bells[1], .policy = {.spin = {}}, .deadline = rlx::Clock::now()};
  const auto payload = std::span(reinterpret_cast<const std::byte*>(data), size);
  if (size > kCapacity - 16 || !producer.send(0, payload, produce)) return;
  rlx::shm::RingWait consume{
      .own = &bells[1], .other = &bells[0], .policy = {.spin = {}}, .deadline = rlx::Clock::now()};
  if (!consumer.take_header(consume)) std::abort();
  try {
    while (auto header = consumer.take_header(consume)) {
      if (header->length > size) return;  // more than could have arrived: it never completes
      std::vector<std::byte> message(header->length);
      if (!consumer.take_payload(message, consume)) return;
    }
  } catch (const rlx::CollectiveError& error) {
    if (error.kind() != rlx::ErrorKind::protocol_violation) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < rlx::kEncodedCallBytes) return 0;
  posted_call(data);
  ring_contents(data + rlx::kEncodedCallBytes, size - rlx::kEncodedCallBytes);
  return 0;
}
