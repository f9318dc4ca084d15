#include "rlx/transport/handshake.h"

#include <algorithm>
#include <string>

#include "rlx/transport/wire.h"

namespace rlx::wire {
namespace {

constexpr std::uint32_t kHelloMagic = 0x48584c52;      // "RLXH"
constexpr std::uint32_t kChallengeMagic = 0x43584c52;  // "RLXC"
constexpr std::uint32_t kWelcomeMagic = 0x57584c52;    // "RLXW"

template <std::size_t N>
std::array<std::byte, N> to_array(const std::vector<std::byte>& bytes) {
  std::array<std::byte, N> out{};
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return out;
}

void expect_magic_and_version(wire::ByteReader& r, std::uint32_t magic, const char* what) {
  if (r.u32() != magic) throw wire::DecodeError(std::string("not an rlx ") + what);
  const std::uint16_t version = r.u16();
  if (version != kProtocolVersion) {
    throw wire::DecodeError("peer speaks rlx protocol version " + std::to_string(version) +
                            ", this rlx speaks " + std::to_string(kProtocolVersion) +
                            " (run the same rlx build on every rank)");
  }
  if (r.u16() != 0) throw wire::DecodeError(std::string("reserved bits set in ") + what);
}

template <std::size_t N>
void read_into(wire::ByteReader& r, std::array<std::byte, N>& out) {
  auto bytes = r.raw(N);
  std::copy(bytes.begin(), bytes.end(), out.begin());
}

auth::Mac mac_with_label(std::string_view token, std::string_view label,
                         std::span<const std::byte> hello_bytes, const auth::Nonce& nonce) {
  const std::span<const std::byte> parts[] = {std::as_bytes(std::span(label)), hello_bytes, nonce};
  return auth::mac(token, parts);
}

}  // namespace

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello) {
  wire::ByteWriter w;
  w.u32(kHelloMagic);
  w.u16(kProtocolVersion);
  w.u16(0);
  w.u32(hello.world_size);
  w.u32(hello.from_rank);
  w.u32(hello.to_rank);
  w.u32(hello.connection);
  w.raw(hello.nonce);
  return to_array<kHelloBytes>(w.bytes());
}

Hello decode_hello(std::span<const std::byte, kHelloBytes> bytes) {
  wire::ByteReader r(bytes);
  expect_magic_and_version(r, kHelloMagic, "hello");
  Hello hello;
  hello.world_size = r.u32();
  hello.from_rank = r.u32();
  hello.to_rank = r.u32();
  hello.connection = r.u32();
  read_into(r, hello.nonce);
  return hello;
}

std::string refusal_reason(const Hello& hello, int rank, int world_size,
                           std::uint32_t max_connection) {
  if (hello.world_size != static_cast<std::uint32_t>(world_size)) {
    return "it belongs to a world of " + std::to_string(hello.world_size) + " ranks";
  }
  if (hello.to_rank != static_cast<std::uint32_t>(rank)) {
    return "it asked for rank " + std::to_string(hello.to_rank);
  }
  if (hello.from_rank <= static_cast<std::uint32_t>(rank) ||
      hello.from_rank >= static_cast<std::uint32_t>(world_size) ||
      hello.connection > max_connection) {
    return "no connection " + std::to_string(hello.connection) + " from rank " +
           std::to_string(hello.from_rank) + " is expected";
  }
  return {};
}

std::array<std::byte, kChallengeBytes> encode_challenge(const Challenge& challenge) {
  wire::ByteWriter w;
  w.u32(kChallengeMagic);
  w.u16(kProtocolVersion);
  w.u16(0);
  w.raw(challenge.nonce);
  w.raw(challenge.mac);
  return to_array<kChallengeBytes>(w.bytes());
}

Challenge decode_challenge(std::span<const std::byte, kChallengeBytes> bytes) {
  wire::ByteReader r(bytes);
  expect_magic_and_version(r, kChallengeMagic, "challenge");
  Challenge challenge;
  read_into(r, challenge.nonce);
  read_into(r, challenge.mac);
  return challenge;
}

auth::Mac acceptor_mac(std::string_view token, std::span<const std::byte> hello_bytes,
                       const auth::Nonce& acceptor_nonce) {
  return mac_with_label(token, "rlx/1 accept", hello_bytes, acceptor_nonce);
}

auth::Mac connector_mac(std::string_view token, std::span<const std::byte> hello_bytes,
                        const auth::Nonce& acceptor_nonce) {
  return mac_with_label(token, "rlx/1 connect", hello_bytes, acceptor_nonce);
}

std::array<std::byte, kWelcomeBytes> encode_welcome() {
  wire::ByteWriter w;
  w.u32(kWelcomeMagic);
  return to_array<kWelcomeBytes>(w.bytes());
}

bool is_welcome(std::span<const std::byte, kWelcomeBytes> bytes) {
  wire::ByteReader r(bytes);
  return r.u32() == kWelcomeMagic;
}

}  // namespace rlx::wire
