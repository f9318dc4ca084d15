#include "rlx/transport/pending_handshakes.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace rlx {
namespace {

using namespace std::chrono_literals;

struct Port {
  boost::asio::io_context io;
  PendingHandshakes pending;
  int accepts = 0;
  std::vector<PendingHandshakes::Ticket> tickets;
  std::vector<int> evicted;  // by admission order

  Port(std::size_t limit, std::chrono::milliseconds grace)
      : pending(io.get_executor(), limit, grace) {}

  void accept() {
    pending.when_room([this] { ++accepts; });
  }
  void admit() {
    const int order = static_cast<int>(tickets.size());
    tickets.push_back(pending.admit([this, order] { evicted.push_back(order); }));
  }
};

TEST(PendingHandshakes, AcceptsAtOnceWhileThereIsRoom) {
  Port port(2, 1s);
  port.accept();
  port.admit();
  port.accept();
  port.admit();
  EXPECT_EQ(port.accepts, 2);
  EXPECT_EQ(port.pending.pending(), 2u);
}

TEST(PendingHandshakes, AFullPortPausesUntilAHandshakeEnds) {
  Port port(2, 1h);
  port.admit();
  port.admit();
  port.accept();
  EXPECT_EQ(port.accepts, 0);  // both are young: nobody is evicted
  port.pending.finished(port.tickets[1]);
  EXPECT_EQ(port.accepts, 1);
  EXPECT_TRUE(port.evicted.empty());
  port.pending.finished(port.tickets[1]);  // twice is harmless
  EXPECT_EQ(port.pending.pending(), 1u);
}

TEST(PendingHandshakes, AFullPortEvictsTheOldestPastItsGrace) {
  Port port(2, 0ms);
  port.admit();
  port.admit();
  port.accept();
  EXPECT_EQ(port.accepts, 1);
  EXPECT_EQ(port.evicted, std::vector<int>{0});
  EXPECT_EQ(port.pending.pending(), 1u);
  port.pending.finished(port.tickets[0]);  // the evicted one closing later changes nothing
  EXPECT_EQ(port.pending.pending(), 1u);
}

TEST(PendingHandshakes, APausedPortEvictsWhenTheOldestOutstaysItsGrace) {
  Port port(1, 50ms);
  const auto start = PendingHandshakes::Clock::now();  // before the grace starts
  port.admit();
  port.accept();
  EXPECT_EQ(port.accepts, 0);
  port.io.run_for(5s);  // returns once the timer has fired and nothing is left
  EXPECT_EQ(port.accepts, 1);
  EXPECT_EQ(port.evicted, std::vector<int>{0});
  EXPECT_GE(PendingHandshakes::Clock::now() - start, 50ms);
}

TEST(PendingHandshakes, TheDefaultLimitIsAQuarterOfTheDescriptorLimit) {
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  auto limit_with_files = [&](rlim_t files) {
    rlimit lowered = saved;
    lowered.rlim_cur = std::min(files, saved.rlim_max);
    EXPECT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);
    return PendingHandshakes::default_limit();
  };
  EXPECT_EQ(limit_with_files(256), 64u);
  EXPECT_EQ(limit_with_files(32), 16u);
  if (saved.rlim_max >= 4096) {
    EXPECT_EQ(limit_with_files(4096), 128u);
  }
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
}

}  // namespace
}  // namespace rlx
