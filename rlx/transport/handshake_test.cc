#include "rlx/transport/handshake.h"

#include <gtest/gtest.h>

#include "rlx/transport/wire.h"

namespace rlx::wire {
namespace {

TEST(Handshake, HelloAndChallengeRoundTrip) {
  const Hello hello{8, 5, 2, 1, auth::fresh_nonce()};
  const auto bytes = encode_hello(hello);
  const Hello back = decode_hello(bytes);
  EXPECT_EQ(back.world_size, 8u);
  EXPECT_EQ(back.from_rank, 5u);
  EXPECT_EQ(back.to_rank, 2u);
  EXPECT_EQ(back.connection, 1u);
  EXPECT_EQ(back.nonce, hello.nonce);
  const Challenge challenge{auth::fresh_nonce(), acceptor_mac("t", bytes, hello.nonce)};
  const Challenge c2 = decode_challenge(encode_challenge(challenge));
  EXPECT_EQ(c2.nonce, challenge.nonce);
  EXPECT_EQ(c2.mac, challenge.mac);
  EXPECT_TRUE(is_welcome(encode_welcome()));
}

TEST(Handshake, ProofsDependOnTokenRoleHelloAndNonce) {
  const auto hello = encode_hello({2, 1, 0, 0, auth::fresh_nonce()});
  const auto nonce = auth::fresh_nonce();
  const auto proof = connector_mac("secret", hello, nonce);
  EXPECT_TRUE(auth::equal(proof, connector_mac("secret", hello, nonce)));
  EXPECT_FALSE(auth::equal(proof, connector_mac("Secret", hello, nonce)));
  EXPECT_FALSE(auth::equal(proof, acceptor_mac("secret", hello, nonce)));  // no reflection
  EXPECT_FALSE(
      auth::equal(proof, connector_mac("secret", hello, auth::fresh_nonce())));  // no replay
  EXPECT_FALSE(auth::equal(proof, connector_mac("", hello, nonce)));
}

TEST(Handshake, RejectsOtherVersionsAndStrangers) {
  auto hello = encode_hello({2, 1, 0, 0, {}});
  hello[4] = std::byte{kProtocolVersion + 1};  // a later version
  try {
    decode_hello(hello);
    FAIL();
  } catch (const wire::DecodeError& error) {
    EXPECT_NE(std::string(error.what()).find("version " + std::to_string(kProtocolVersion + 1)),
              std::string::npos);
  }
  std::array<std::byte, kHelloBytes> http{};
  const char* get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  for (std::size_t i = 0; i < 27; ++i) http[i] = static_cast<std::byte>(get[i]);
  EXPECT_THROW(decode_hello(http), wire::DecodeError);
}

}  // namespace
}  // namespace rlx::wire
