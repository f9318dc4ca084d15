#include "transport/rendezvous/protocol.h"

#include <gtest/gtest.h>

#include "transport/wire.h"

namespace rlx::rendezvous {
namespace {

TEST(RendezvousProtocol, RegistrationRoundTripsAndAuthenticates) {
  const auto server_nonce = auth::fresh_nonce();
  const Registration reg{4, 3, {"10.1.2.3", 4567}, auth::fresh_nonce()};
  const auto body = encode_register(reg, "token", server_nonce);
  const Registration back = decode_register(body, "token", server_nonce);
  EXPECT_EQ(back.rank, 3u);
  EXPECT_EQ(back.world_size, 4u);
  EXPECT_EQ(back.endpoint, reg.endpoint);
  EXPECT_THROW(decode_register(body, "other", server_nonce), wire::DecodeError);
  EXPECT_THROW(decode_register(body, "token", auth::fresh_nonce()), wire::DecodeError);  // replay
}

TEST(RendezvousProtocol, TableRoundTripsAndAuthenticates) {
  const std::vector<HostPort> table{{"a", 1}, {"::1", 2}};
  const auto nonce = auth::fresh_nonce();
  const auto body = encode_table(table, "t", nonce);
  EXPECT_EQ(decode_table(body, "t", nonce), table);
  EXPECT_THROW(decode_table(body, "t", auth::fresh_nonce()), wire::DecodeError);
}

TEST(RendezvousProtocol, TruncatedOrOversizedInputIsRejected) {
  const auto nonce = auth::fresh_nonce();
  const auto body = encode_register({2, 1, {"h", 1}, nonce}, "t", nonce);
  for (std::size_t cut = 0; cut < body.size(); cut += 7) {
    EXPECT_THROW(decode_register(std::span(body).first(cut), "t", nonce), wire::DecodeError);
  }
  wire::ByteWriter w;
  w.u32(0x52584c52);
  w.u16(kVersion);
  w.u16(0);
  w.u32(2);
  w.u32(0);
  w.u32(0xffffffffu);  // a 4 GiB host name
  std::vector<std::byte> huge = w.take();
  huge.resize(huge.size() + auth::kMacBytes);
  EXPECT_THROW(decode_register(huge, "t", nonce), wire::DecodeError);
}

}  // namespace
}  // namespace rlx::rendezvous
