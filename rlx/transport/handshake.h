// The handshake that opens every connection between two ranks.
//
//   connector -> acceptor   Hello      who I am, whom I want, which connection, nonce_c
//   acceptor  -> connector  Challenge  nonce_a, MAC(token, "accept"  | hello | nonce_a)
//   connector -> acceptor   Response   MAC(token, "connect" | hello | nonce_a)
//   acceptor  -> connector  Welcome
//
// Each side proves it holds the job token without sending it; both nonces are
// fresh, so replaying a recorded handshake fails. The acceptor checks magic,
// protocol version, world size, ranks and connection index before answering.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "rlx/transport/auth.h"

namespace rlx::wire {

// 2: the frame header carries the call as call_codec.h encodes it.
inline constexpr std::uint16_t kProtocolVersion = 2;

struct Hello {
  std::uint32_t world_size = 0;
  std::uint32_t from_rank = 0;
  std::uint32_t to_rank = 0;
  std::uint32_t connection = 0;  // 0: point-to-point messages; 1..lanes: collective lanes
  auth::Nonce nonce{};
};

inline constexpr std::size_t kHelloBytes = 40;
inline constexpr std::size_t kChallengeBytes = 56;
inline constexpr std::size_t kResponseBytes = auth::kMacBytes;
inline constexpr std::size_t kWelcomeBytes = 4;

std::array<std::byte, kHelloBytes> encode_hello(const Hello& hello);
// Throws wire::DecodeError: bad magic, another protocol version, reserved bits.
Hello decode_hello(std::span<const std::byte, kHelloBytes> bytes);

// Why an acceptor (rank `rank` of `world_size`, taking connections
// 0..max_connection from higher ranks) refuses `hello`; empty when it may
// proceed to the challenge. Shared by every transport that uses this handshake.
std::string refusal_reason(const Hello& hello, int rank, int world_size,
                           std::uint32_t max_connection);

struct Challenge {
  auth::Nonce nonce{};
  auth::Mac mac{};
};
std::array<std::byte, kChallengeBytes> encode_challenge(const Challenge& challenge);
Challenge decode_challenge(std::span<const std::byte, kChallengeBytes> bytes);

// The acceptor's proof, and the connector's.
auth::Mac acceptor_mac(std::string_view token, std::span<const std::byte> hello_bytes,
                       const auth::Nonce& acceptor_nonce);
auth::Mac connector_mac(std::string_view token, std::span<const std::byte> hello_bytes,
                        const auth::Nonce& acceptor_nonce);

std::array<std::byte, kWelcomeBytes> encode_welcome();
bool is_welcome(std::span<const std::byte, kWelcomeBytes> bytes);

}  // namespace rlx::wire
