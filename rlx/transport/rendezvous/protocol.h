// The rendezvous protocol: how ranks learn every rank's listening endpoint.
//
//   server -> rank    ServerHello  nonce_s
//   rank   -> server  Register     world size, rank, host, port, nonce_c,
//                                  MAC(token, register body | nonce_s)
//   server -> rank    Waiting      (while ranks are missing, at most twice a second)
//                                  the ranks not registered yet, registrations it
//                                  refused, MAC(token, waiting | nonce_c)
//   server -> rank    Table        every rank's host:port, MAC(token, table | nonce_c)
//
// Each message travels as a u32 length and a body of at most kMaxMessageBytes.
// The server is rlxrun (or any launcher, or a torchrun-style rank 0); the
// client is every rank. A rank that gives up waiting for the table names
// the ranks of the last Waiting it read, so every rank, not only the server,
// says who never started or was refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/transport/auth.h"
#include "rlx/transport/endpoint.h"

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

// Who the server still waits for, as far as a message lists them.
struct Waiting {
  std::uint32_t world_size = 0;
  std::uint32_t missing_count = 0;     // every rank not registered yet
  std::vector<std::uint32_t> missing;  // the first kMaxListedRanks of them
  // "ADDRESS: why" of the last kMaxListedRefusals registrations refused
  // (another job token, world size or a duplicate rank), at most
  // kMaxRefusalLength bytes each.
  std::vector<std::string> refusals;
  friend bool operator==(const Waiting&, const Waiting&) = default;
};
inline constexpr std::size_t kMaxListedRanks = 16;
inline constexpr std::size_t kMaxListedRefusals = 4;
inline constexpr std::size_t kMaxRefusalLength = 200;

std::vector<std::byte> encode_waiting(const Waiting& waiting, std::string_view token,
                                      const auth::Nonce& client_nonce);
// Authenticates and decodes; throws wire::DecodeError.
Waiting decode_waiting(std::span<const std::byte> body, std::string_view token,
                       const auth::Nonce& client_nonce);
// True when `body` (after the registration) is a Waiting, not the Table.
bool is_waiting(std::span<const std::byte> body);
// "ranks 2, 3 have not registered (2 of 4 have); it refused ADDRESS: why":
// what a rank that gives up says about the others.
std::string describe(const Waiting& waiting);

std::vector<std::byte> encode_table(const std::vector<HostPort>& table, std::string_view token,
                                    const auth::Nonce& client_nonce);
std::vector<HostPort> decode_table(std::span<const std::byte> body, std::string_view token,
                                   const auth::Nonce& client_nonce);

// The MAC that ends a table message whose other bytes are `signed_part`: what
// encode_table appends and decode_table checks first (a fuzzer signs its
// inputs with it to reach the parser behind the check).
auth::Mac table_mac(std::span<const std::byte> signed_part, std::string_view token,
                    const auth::Nonce& client_nonce);
// The same for a Waiting.
auth::Mac waiting_mac(std::span<const std::byte> signed_part, std::string_view token,
                      const auth::Nonce& client_nonce);

}  // namespace rlx::rendezvous
