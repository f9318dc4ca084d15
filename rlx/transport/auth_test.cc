#include "rlx/transport/auth.h"

#include <gtest/gtest.h>

namespace rlx::auth {
namespace {

TEST(Auth, NoncesAreFresh) { EXPECT_NE(fresh_nonce(), fresh_nonce()); }

TEST(Auth, TokensAreFreshHexOf32Bytes) {
  const std::string token = fresh_token();
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
  EXPECT_NE(token, fresh_token());
}

TEST(Auth, HmacSha256MatchesRfc4231Case2) {
  const std::string data = "what do ya want for nothing?";
  const std::span<const std::byte> parts[] = {std::as_bytes(std::span(data))};
  const Mac got = mac("Jefe", parts);
  const unsigned char want[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_TRUE(equal(got, std::as_bytes(std::span(want))));
  const std::string split1 = "what do ya ", split2 = "want for nothing?";
  const std::span<const std::byte> two[] = {std::as_bytes(std::span(split1)),
                                            std::as_bytes(std::span(split2))};
  EXPECT_EQ(mac("Jefe", two), got);
  EXPECT_FALSE(equal(got, std::as_bytes(std::span(want)).first(31)));
}

}  // namespace
}  // namespace rlx::auth
