// The rendezvous protocol: how ranks learn every rank's listening endpoint.
//
//   server -> rank    ServerHello  nonce_s
//   rank   -> server  Register     world size, rank, host, port, nonce_c,
//                                  MAC(token, register body | nonce_s)
//   server -> rank    Table        every rank's host:port, MAC(token, table | nonce_c)
//
// Each message travels as a u32 length and a body of at most kMaxMessageBytes.
// The server is rlxrun (or any launcher); the client is every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/auth.h"
#include "transport/endpoint.h"

namespace rlx::rendezvous {

inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kMaxMessageBytes = 1 << 20;
inline constexpr std::size_t kMaxHostLength = 255;

struct Registration {
  std::uint32_t world_size = 0;
  std::uint32_t rank = 0;
  HostPort endpoint;
  auth::Nonce nonce{};
};

std::vector<std::byte> encode_server_hello(const auth::Nonce& server_nonce);
// Throws wire::DecodeError.
auth::Nonce decode_server_hello(std::span<const std::byte> body);

std::vector<std::byte> encode_register(const Registration& r, std::string_view token,
                                       const auth::Nonce& server_nonce);
// Decodes and authenticates; throws wire::DecodeError saying what is wrong
// (including "wrong job token").
Registration decode_register(std::span<const std::byte> body, std::string_view token,
                             const auth::Nonce& server_nonce);

std::vector<std::byte> encode_table(const std::vector<HostPort>& table, std::string_view token,
                                    const auth::Nonce& client_nonce);
std::vector<HostPort> decode_table(std::span<const std::byte> body, std::string_view token,
                                   const auth::Nonce& client_nonce);

// The MAC that ends a table message whose other bytes are `signed_part`: what
// encode_table appends and decode_table checks first (a fuzzer signs its
// inputs with it to reach the parser behind the check).
auth::Mac table_mac(std::span<const std::byte> signed_part, std::string_view token,
                    const auth::Nonce& client_nonce);

}  // namespace rlx::rendezvous
