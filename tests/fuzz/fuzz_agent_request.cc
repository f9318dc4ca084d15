// libFuzzer target: the request rlxrun's remote agent reads from ssh's stdin.
// Decoding either succeeds, and then round-trips exactly, or throws
// AgentRequestError.
#include <cstdlib>
#include <string_view>

#include "rlx/launcher/agent_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace rlx::launcher;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const AgentRequest request = decode_agent_request(bytes);
    if (encode_agent_request(request) != bytes) std::abort();
  } catch (const AgentRequestError&) {
  }
  return 0;
}
