#include "rlx/transport/failure_relay.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace rlx {
namespace {

// What the relay sent, as a peer decodes it.
struct Sent {
  wire::FrameHeader header;
  std::string text;
};

class FailureRelayTest : public ::testing::Test {
 protected:
  FailureLatch latch;
  Mailbox mailbox{1 << 20};
  std::vector<Sent> sent;
  FailureRelay relay{
      1, latch, mailbox,
      [this](const wire::FrameHeader& header, std::span<const std::byte> payload) {
        const auto encoded = wire::encode(header);
        sent.push_back({wire::decode(encoded),
                        {reinterpret_cast<const char*>(payload.data()), payload.size()}});
      }};
};

TEST_F(FailureRelayTest, AnOwnFailureWakesReceivesAndReachesPeersBlamingItsCause) {
  const CollectiveError lost(ErrorKind::peer_lost, {.rank = 1, .world_size = 3, .peer = 2},
                             "rank 2 has shut down its transport");
  ASSERT_TRUE(relay.trip(lost, /*heard_from_peer=*/false));
  EXPECT_THROW(mailbox.try_take(0, 5), CollectiveError);
  relay.tell_peers(lost);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].header.kind, wire::FrameKind::abort);
  EXPECT_EQ(sent[0].text, lost.what());
  const CollectiveError heard =
      wire::relayed_failure(sent[0].header, sent[0].text, 1, {.rank = 0, .world_size = 3});
  EXPECT_EQ(heard.kind(), ErrorKind::peer_lost);
  EXPECT_EQ(heard.peer(), 2);

  EXPECT_FALSE(relay.trip(CollectiveError(ErrorKind::timeout, {}, "later"), false));
  relay.say_goodbye();  // an own failure was told already: only the close follows
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].header.kind, wire::FrameKind::close);
}

TEST_F(FailureRelayTest, AFailureHeardFromAPeerIsPassedOnOnlyAtCloseAndBeforeIt) {
  const CollectiveError heard(ErrorKind::mismatch, {.rank = 1, .world_size = 3, .peer = 0},
                              "rank 0 failed: different calls");
  ASSERT_TRUE(relay.trip(heard, /*heard_from_peer=*/true));
  EXPECT_TRUE(sent.empty());
  relay.say_goodbye();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].header.kind, wire::FrameKind::abort);
  EXPECT_EQ(sent[0].text, heard.what());
  EXPECT_EQ(sent[1].header.kind, wire::FrameKind::close);
}

// A long text loses its middle: the start says what failed, the end what
// to check.
TEST_F(FailureRelayTest, AnAbortsTextIsCutToWhatEveryReceiverTakesKeepingItsHint) {
  const CollectiveError wordy(ErrorKind::timeout, {.rank = 1, .world_size = 2},
                              std::string(3 * wire::kMaxAbortTextBytes, 'x'), "is rank 0 alive?");
  relay.trip(wordy, false);
  relay.tell_peers(wordy);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].text.size(), wire::kMaxAbortTextBytes);
  EXPECT_EQ(sent[0].header.length, wire::kMaxAbortTextBytes);
  EXPECT_EQ(sent[0].text.substr(0, 20), std::string(wordy.what()).substr(0, 20));
  EXPECT_NE(sent[0].text.find(" [...] "), std::string::npos);
  EXPECT_NE(sent[0].text.find("is rank 0 alive?"), std::string::npos);
}

TEST_F(FailureRelayTest, WithoutAFailureClosingSaysOnlyGoodbye) {
  relay.say_goodbye();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].header.kind, wire::FrameKind::close);
  EXPECT_FALSE(latch.tripped());
}

}  // namespace
}  // namespace rlx
