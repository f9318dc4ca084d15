// Writes the fuzzers' seed corpus: valid messages of every kind, made by the
// encoders themselves, so fuzzing starts from inputs that reach deep.
// Usage: make_seeds DIR   (writes DIR/<fuzzer>/<name>)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "rlx/launcher/agent_request.h"
#include "rlx/transport/call_codec.h"
#include "rlx/transport/frame.h"
#include "rlx/transport/handshake.h"
#include "rlx/transport/rendezvous/protocol.h"
#include "rlx/transport/shm/ring.h"

namespace {

std::filesystem::path root;

void write(const std::string& fuzzer, const std::string& name, const void* data, std::size_t size,
           const std::string& prefix = "") {
  std::filesystem::create_directories(root / fuzzer);
  std::ofstream out(root / fuzzer / name, std::ios::binary);
  out << prefix;
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

template <typename Bytes>
void write_bytes(const std::string& fuzzer, const std::string& name, const Bytes& bytes,
                 const std::string& prefix = "") {
  write(fuzzer, name, bytes.data(), bytes.size(), prefix);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rlx;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds DIR\n");
    return 2;
  }
  root = argv[1];
  write_bytes(
      "fuzz_frame_header", "message",
      wire::encode({.kind = wire::FrameKind::message, .tag = 7, .sequence = 3, .length = 100}));
  write_bytes("fuzz_frame_header", "all_sum",
              wire::encode(wire::collective_header({.kind = CollectiveKind::all_reduce,
                                                    .op = ReduceOp::max,
                                                    .dtype = Dtype::f16,
                                                    .count = 1000,
                                                    .sequence = 9},
                                                   2, 512)));
  const wire::Hello hello{.world_size = 4, .from_rank = 3, .to_rank = 1, .connection = 2};
  const auto hello_bytes = wire::encode_hello(hello);
  const auto challenge = wire::encode_challenge({});
  std::string both(reinterpret_cast<const char*>(hello_bytes.data()), hello_bytes.size());
  both.append(reinterpret_cast<const char*>(challenge.data()), challenge.size());
  write_bytes("fuzz_handshake", "hello", hello_bytes);
  write_bytes("fuzz_handshake", "hello_and_challenge", both);

  const auth::Nonce nonce{};
  write_bytes("fuzz_rendezvous", "server_hello", rendezvous::encode_server_hello(nonce),
              std::string(1, '\0'));
  write_bytes(
      "fuzz_rendezvous", "register",
      rendezvous::encode_register({.world_size = 4, .rank = 2, .endpoint = {"10.0.0.2", 4000}},
                                  "fuzz-token", nonce),
      std::string(1, '\1'));
  auto table =
      rendezvous::encode_table({{"10.0.0.1", 4000}, {"fd00::2", 4001}}, "fuzz-token", nonce);
  table.resize(table.size() - auth::kMacBytes);  // the fuzzer signs what it is given
  write_bytes("fuzz_rendezvous", "table", table, std::string(1, '\2'));
  auto waiting = rendezvous::encode_waiting(
      {.world_size = 4, .missing_count = 2, .missing = {1, 3}, .refusals = {"10.0.0.9: why"}},
      "fuzz-token", nonce);
  waiting.resize(waiting.size() - auth::kMacBytes);
  write_bytes("fuzz_rendezvous", "waiting", waiting, std::string(1, '\3'));

  write_bytes("fuzz_agent_request", "request",
              launcher::encode_agent_request({.environment = {"RLX_RANK=1", "RLX_JOB_TOKEN=ab"},
                                              .cwd = "/work",
                                              .argv = {"./prog", "--steps", "10"},
                                              .bind_to = launcher::BindTo::core,
                                              .local_rank = 1,
                                              .local_size = 2}));
  // A posted all_reduce, then two messages as they lie in a ring: a 16-byte
  // header each and the payload padded to 8 bytes.
  const EncodedCall posted = encode_call(
      {.kind = CollectiveKind::all_reduce, .op = ReduceOp::sum, .dtype = Dtype::f32, .count = 9});
  std::string ring(reinterpret_cast<const char*>(posted.data()), posted.size());
  for (const std::string payload : {"hello", "a second, longer message"}) {
    const shm::RingHeader header = shm::make_ring_header(3, payload.size());
    ring.append(reinterpret_cast<const char*>(&header), sizeof header);
    ring.append(payload).append((8 - payload.size() % 8) % 8, '\0');
  }
  write_bytes("fuzz_shm_channel", "posted_and_two_messages", ring);
  return 0;
}
