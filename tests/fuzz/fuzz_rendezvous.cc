// libFuzzer target: the rendezvous messages a launcher and its ranks exchange.
// The first byte picks the message; tables and waiting notices are signed
// with the job token first, so the fuzzer reaches the parser behind the MAC
// check.
#include "rlx/transport/errors.h"
#include "rlx/transport/rendezvous/protocol.h"
#include "rlx/transport/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rlx::rendezvous;
  if (size == 0) return 0;
  const auto body =
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  constexpr std::string_view kToken = "fuzz-token";
  const rlx::auth::Nonce nonce{};
  try {
    switch (data[0] % 4) {
      case 0:
        (void)decode_server_hello(body);
        break;
      case 1:
        (void)decode_register(body, kToken, nonce);
        break;
      case 2: {
        std::vector<std::byte> signed_body(body.begin(), body.end());
        const rlx::auth::Mac mac = table_mac(signed_body, kToken, nonce);
        signed_body.insert(signed_body.end(), mac.begin(), mac.end());
        (void)decode_table(signed_body, kToken, nonce);
        break;
      }
      default: {
        std::vector<std::byte> signed_body(body.begin(), body.end());
        const rlx::auth::Mac mac = waiting_mac(signed_body, kToken, nonce);
        signed_body.insert(signed_body.end(), mac.begin(), mac.end());
        (void)is_waiting(signed_body);
        (void)describe(decode_waiting(signed_body, kToken, nonce));  // as a rank that gives up
      }
    }
  } catch (const rlx::wire::DecodeError&) {
  }
  return 0;
}
