// Job-token authentication: HMAC-SHA256 challenge-response (OpenSSL libcrypto).
// The token itself never travels; each side proves it knows the token by
// MACing fresh nonces from both sides, so a recorded exchange cannot be replayed.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace rlx::auth {

inline constexpr std::size_t kNonceBytes = 16;
inline constexpr std::size_t kMacBytes = 32;
using Nonce = std::array<std::byte, kNonceBytes>;
using Mac = std::array<std::byte, kMacBytes>;

// A fresh random nonce (from the kernel's CSPRNG).
Nonce fresh_nonce();
// A fresh job token: 32 random bytes as 64 hex digits (rlxrun's per job, a
// PMIx job's rank 0's).
std::string fresh_token();

// HMAC-SHA256 over the concatenation of `parts`, keyed by the job token.
Mac mac(std::string_view token, std::span<const std::span<const std::byte>> parts);

// Constant-time comparison.
bool equal(const Mac& a, std::span<const std::byte> b);

}  // namespace rlx::auth
