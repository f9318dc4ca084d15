#include "rlx/transport/rendezvous/server.h"

#include <thread>

#include <gtest/gtest.h>

#include "rlx/transport/errors.h"
#include "rlx/transport/pending_handshakes.h"
#include "rlx/transport/rendezvous/client.h"

namespace rlx::rendezvous {
namespace {

using namespace std::chrono_literals;

std::vector<HostPort> join(const Server& server, const std::string& token, int rank, int n) {
  UniqueFd fd = connect_with_retry(server.address(), Clock::now() + 10s);
  return exchange_endpoints(fd.get(), server.address(), token, rank, n,
                            {"127.0.0.1", static_cast<std::uint16_t>(1000 + rank)},
                            Clock::now() + 20s);
}

TEST(RendezvousServer, EveryRankLearnsTheSameTableDespiteStrangers) {
  Server server(3, "job-token", "127.0.0.1");
  EXPECT_EQ(server.missing(), (std::vector<int>{0, 1, 2}));

  // A stranger speaking garbage, and a rank with the wrong token: both are
  // dropped (and logged) while the real ranks complete.
  UniqueFd stranger = connect_with_retry(server.address(), Clock::now() + 10s);
  const std::string garbage = "GET / HTTP/1.1\r\n\r\n";
  send_all(stranger.get(), std::as_bytes(std::span(garbage)), Clock::now() + 5s);
  EXPECT_THROW(join(server, "wrong-token", 1, 3), CollectiveError);

  std::vector<std::vector<HostPort>> tables(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back(
        [&, r] { tables[static_cast<std::size_t>(r)] = join(server, "job-token", r, 3); });
  }
  for (auto& t : ranks) t.join();
  EXPECT_TRUE(server.complete());
  const std::vector<HostPort> want{{"127.0.0.1", 1000}, {"127.0.0.1", 1001}, {"127.0.0.1", 1002}};
  for (const auto& table : tables) EXPECT_EQ(table, want);
}

// More silent strangers than the port takes at once arrive first: the oldest
// are evicted after their grace, and the ranks still register.
TEST(RendezvousServer, SilentStrangersFillingThePortAreEvictedSoRanksStillRegister) {
  Server server(2, "t", "127.0.0.1");
  std::vector<UniqueFd> strangers;
  for (std::size_t i = 0; i < PendingHandshakes::default_limit() + 20; ++i) {
    strangers.push_back(connect_with_retry(server.address(), Clock::now() + 10s));
  }
  const auto start = Clock::now();
  std::thread other([&] { join(server, "t", 1, 2); });
  EXPECT_EQ(join(server, "t", 0, 2).size(), 2u);
  other.join();
  EXPECT_TRUE(server.complete());
  EXPECT_LT(Clock::now() - start, 8s);  // a grace of 1 s, not the 10 s registration limit
}

TEST(RendezvousServer, AClientGivesUpAtItsDeadlineNamingTheCoordinator) {
  Server server(2, "t", "127.0.0.1");
  UniqueFd fd = connect_with_retry(server.address(), Clock::now() + 10s);
  try {
    exchange_endpoints(fd.get(), server.address(), "t", 0, 2, {"127.0.0.1", 1},
                       Clock::now() + 300ms);
    FAIL();
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::timeout);
    EXPECT_NE(std::string(error.what()).find(server.address().to_string()), std::string::npos);
    // The server's notice, sent as the rank registered, names who is missing.
    EXPECT_NE(std::string(error.what()).find("; rank 1 has not registered (1 of 2 have)"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(server.missing(), (std::vector<int>{1}));
}

}  // namespace
}  // namespace rlx::rendezvous
