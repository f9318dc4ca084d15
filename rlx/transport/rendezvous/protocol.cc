#include "rlx/transport/rendezvous/protocol.h"

#include <algorithm>

#include "rlx/transport/errors.h"
#include "rlx/transport/wire.h"

namespace rlx::rendezvous {
namespace {

constexpr std::uint32_t kHelloMagic = 0x53584c52;     // "RLXS"
constexpr std::uint32_t kRegisterMagic = 0x52584c52;  // "RLXR"
constexpr std::uint32_t kTableMagic = 0x54584c52;     // "RLXT"
constexpr std::uint32_t kWaitingMagic = 0x57584c52;   // "RLXW"
constexpr std::uint32_t kMaxRanks = 1 << 20;

void header(wire::ByteWriter& w, std::uint32_t magic) {
  w.u32(magic);
  w.u16(kVersion);
  w.u16(0);
}

void expect_header(wire::ByteReader& r, std::uint32_t magic, const char* what) {
  if (r.u32() != magic) throw wire::DecodeError(std::string("not an rlx rendezvous ") + what);
  const auto version = r.u16();
  if (version != kVersion) {
    throw wire::DecodeError("rendezvous protocol version " + std::to_string(version) +
                            ", expected " + std::to_string(kVersion));
  }
  if (r.u16() != 0) throw wire::DecodeError("reserved bits set");
}

template <std::size_t N>
std::array<std::byte, N> read_array(wire::ByteReader& r) {
  std::array<std::byte, N> out{};
  auto bytes = r.raw(N);
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return out;
}

auth::Mac mac_over(std::string_view token, std::string_view label, std::span<const std::byte> body,
                   const auth::Nonce& nonce) {
  const std::span<const std::byte> parts[] = {std::as_bytes(std::span(label)), body, nonce};
  return auth::mac(token, parts);
}

// The body without its trailing MAC, and the MAC; throws if too short.
std::pair<std::span<const std::byte>, std::span<const std::byte>> split_mac(
    std::span<const std::byte> body) {
  if (body.size() < auth::kMacBytes) throw wire::DecodeError("message too short for its MAC");
  return {body.first(body.size() - auth::kMacBytes), body.last(auth::kMacBytes)};
}

HostPort read_endpoint(wire::ByteReader& r) {
  HostPort endpoint;
  endpoint.host = r.string(kMaxHostLength);
  endpoint.port = r.u16();
  if (endpoint.host.empty() || endpoint.port == 0) {
    throw wire::DecodeError("empty host or port 0 in an endpoint");
  }
  return endpoint;
}

}  // namespace

std::vector<std::byte> encode_server_hello(const auth::Nonce& server_nonce) {
  wire::ByteWriter w;
  header(w, kHelloMagic);
  w.raw(server_nonce);
  return w.take();
}

auth::Nonce decode_server_hello(std::span<const std::byte> body) {
  wire::ByteReader r(body);
  expect_header(r, kHelloMagic, "server hello");
  auto nonce = read_array<auth::kNonceBytes>(r);
  r.expect_end();
  return nonce;
}

std::vector<std::byte> encode_register(const Registration& reg, std::string_view token,
                                       const auth::Nonce& server_nonce) {
  wire::ByteWriter w;
  header(w, kRegisterMagic);
  w.u32(reg.world_size);
  w.u32(reg.rank);
  w.string(reg.endpoint.host);
  w.u16(reg.endpoint.port);
  w.raw(reg.nonce);
  w.raw(mac_over(token, "rlx/1 register", w.bytes(), server_nonce));
  return w.take();
}

Registration decode_register(std::span<const std::byte> body, std::string_view token,
                             const auth::Nonce& server_nonce) {
  const auto [signed_part, mac] = split_mac(body);
  wire::ByteReader r(signed_part);
  expect_header(r, kRegisterMagic, "registration");
  Registration reg;
  reg.world_size = r.u32();
  reg.rank = r.u32();
  reg.endpoint = read_endpoint(r);
  reg.nonce = read_array<auth::kNonceBytes>(r);
  r.expect_end();
  if (!auth::equal(mac_over(token, "rlx/1 register", signed_part, server_nonce), mac)) {
    throw wire::DecodeError(
        "wrong job token (the registration's MAC does not verify) from a "
        "process that says it is rank " +
        std::to_string(reg.rank) + " of " + std::to_string(reg.world_size));
  }
  if (reg.world_size == 0 || reg.world_size > kMaxRanks || reg.rank >= reg.world_size) {
    throw wire::DecodeError("rank " + std::to_string(reg.rank) + " of world size " +
                            std::to_string(reg.world_size) + " is impossible");
  }
  return reg;
}

std::vector<std::byte> encode_table(const std::vector<HostPort>& table, std::string_view token,
                                    const auth::Nonce& client_nonce) {
  wire::ByteWriter w;
  header(w, kTableMagic);
  w.u32(static_cast<std::uint32_t>(table.size()));
  for (const auto& endpoint : table) {
    w.string(endpoint.host);
    w.u16(endpoint.port);
  }
  w.raw(table_mac(w.bytes(), token, client_nonce));
  return w.take();
}

std::vector<HostPort> decode_table(std::span<const std::byte> body, std::string_view token,
                                   const auth::Nonce& client_nonce) {
  const auto [signed_part, mac] = split_mac(body);
  if (!auth::equal(table_mac(signed_part, token, client_nonce), mac)) {
    throw wire::DecodeError("the rendezvous table does not verify (wrong job token?)");
  }
  wire::ByteReader r(signed_part);
  expect_header(r, kTableMagic, "table");
  const std::uint32_t count = r.u32();
  if (count == 0 || count > kMaxRanks) throw wire::DecodeError("impossible table size");
  std::vector<HostPort> table;
  table.reserve(std::min<std::size_t>(count, r.remaining() / 7));
  for (std::uint32_t i = 0; i < count; ++i) table.push_back(read_endpoint(r));
  r.expect_end();
  return table;
}

std::vector<std::byte> encode_waiting(const Waiting& waiting, std::string_view token,
                                      const auth::Nonce& client_nonce) {
  wire::ByteWriter w;
  header(w, kWaitingMagic);
  w.u32(waiting.world_size);
  w.u32(waiting.missing_count);
  const std::size_t listed = std::min(waiting.missing.size(), kMaxListedRanks);
  w.u32(static_cast<std::uint32_t>(listed));
  for (std::size_t i = 0; i < listed; ++i) w.u32(waiting.missing[i]);
  const std::size_t refusals = std::min(waiting.refusals.size(), kMaxListedRefusals);
  w.u32(static_cast<std::uint32_t>(refusals));
  for (std::size_t i = 0; i < refusals; ++i) {
    w.string(std::string_view(waiting.refusals[i]).substr(0, kMaxRefusalLength));
  }
  w.raw(waiting_mac(w.bytes(), token, client_nonce));
  return w.take();
}

Waiting decode_waiting(std::span<const std::byte> body, std::string_view token,
                       const auth::Nonce& client_nonce) {
  const auto [signed_part, mac] = split_mac(body);
  if (!auth::equal(waiting_mac(signed_part, token, client_nonce), mac)) {
    throw wire::DecodeError("the rendezvous's waiting notice does not verify (wrong job token?)");
  }
  wire::ByteReader r(signed_part);
  expect_header(r, kWaitingMagic, "waiting notice");
  Waiting waiting;
  waiting.world_size = r.u32();
  waiting.missing_count = r.u32();
  const std::uint32_t listed = r.u32();
  if (waiting.world_size == 0 || waiting.world_size > kMaxRanks ||
      waiting.missing_count > waiting.world_size || listed > kMaxListedRanks ||
      listed > waiting.missing_count) {
    throw wire::DecodeError("impossible counts in a waiting notice");
  }
  for (std::uint32_t i = 0; i < listed; ++i) {
    waiting.missing.push_back(r.u32());
    if (waiting.missing.back() >= waiting.world_size) {
      throw wire::DecodeError("a waiting notice names a rank outside the world");
    }
  }
  const std::uint32_t refusals = r.u32();
  if (refusals > kMaxListedRefusals) throw wire::DecodeError("too many refusals listed");
  for (std::uint32_t i = 0; i < refusals; ++i) {
    waiting.refusals.push_back(r.string(kMaxRefusalLength));
  }
  r.expect_end();
  return waiting;
}

bool is_waiting(std::span<const std::byte> body) {
  wire::ByteReader r(body);
  return body.size() >= 4 && r.u32() == kWaitingMagic;
}

std::string describe(const Waiting& waiting) {
  std::string ranks;
  for (const std::uint32_t rank : waiting.missing) {
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
  }
  if (waiting.missing_count > waiting.missing.size()) {
    ranks += " and " + std::to_string(waiting.missing_count - waiting.missing.size()) + " more";
  }
  const bool one = waiting.missing_count == 1;
  std::string text = (one ? "rank " : "ranks ") + ranks + (one ? " has" : " have") +
                     " not registered (" +
                     std::to_string(waiting.world_size - waiting.missing_count) + " of " +
                     std::to_string(waiting.world_size) + " have)";
  for (const std::string& refusal : waiting.refusals) {
    text += "; it refused " + excerpt(refusal, kMaxRefusalLength);
  }
  return text;
}

auth::Mac table_mac(std::span<const std::byte> signed_part, std::string_view token,
                    const auth::Nonce& client_nonce) {
  return mac_over(token, "rlx/1 table", signed_part, client_nonce);
}

auth::Mac waiting_mac(std::span<const std::byte> signed_part, std::string_view token,
                      const auth::Nonce& client_nonce) {
  return mac_over(token, "rlx/1 waiting", signed_part, client_nonce);
}

}  // namespace rlx::rendezvous
