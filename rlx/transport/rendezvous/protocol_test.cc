#include "rlx/transport/rendezvous/protocol.h"

#include <gtest/gtest.h>

#include "rlx/transport/wire.h"

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

TEST(RendezvousProtocol, WaitingRoundTripsAuthenticatesAndSaysWhoIsMissing) {
  const Waiting waiting{.world_size = 40,
                        .missing_count = 20,
                        .missing = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
                        .refusals = {"127.0.0.1: wrong job token"}};
  const auto nonce = auth::fresh_nonce();
  const auto body = encode_waiting(waiting, "t", nonce);
  EXPECT_TRUE(is_waiting(body));
  EXPECT_FALSE(is_waiting(encode_table({{"a", 1}}, "t", nonce)));
  EXPECT_EQ(decode_waiting(body, "t", nonce), waiting);
  EXPECT_THROW(decode_waiting(body, "other", nonce), wire::DecodeError);
  EXPECT_EQ(describe(waiting),
            "ranks 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 and 4 more have not "
            "registered (20 of 40 have); it refused 127.0.0.1: wrong job token");
  EXPECT_EQ(describe({.world_size = 3, .missing_count = 1, .missing = {2}}),
            "rank 2 has not registered (2 of 3 have)");
}

TEST(RendezvousProtocol, AWaitingNoticeListsAtMostItsCaps) {
  Waiting many{.world_size = 100, .missing_count = 100};
  for (std::uint32_t r = 0; r < 100; ++r) many.missing.push_back(r);
  for (int i = 0; i < 10; ++i) many.refusals.push_back(std::string(1000, 'x'));
  const auto nonce = auth::fresh_nonce();
  const Waiting back = decode_waiting(encode_waiting(many, "t", nonce), "t", nonce);
  EXPECT_EQ(back.missing.size(), kMaxListedRanks);
  EXPECT_EQ(back.missing_count, 100u);
  ASSERT_EQ(back.refusals.size(), kMaxListedRefusals);
  EXPECT_EQ(back.refusals[0].size(), kMaxRefusalLength);
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
