#include "rlx/transport/mailbox.h"

#include <future>
#include <optional>
#include <stdexcept>
#include <thread>
#include <utility>

#include <gtest/gtest.h>

namespace rlx {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> bytes(std::initializer_list<int> values) {
  std::vector<std::byte> out;
  for (int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

TEST(Mailbox, FifoPerPeerAndTagIndependentAcrossTags) {
  Mailbox box(1 << 20);
  ASSERT_TRUE(box.deliver(1, 7, bytes({1})));
  ASSERT_TRUE(box.deliver(1, 7, bytes({2})));
  ASSERT_TRUE(box.deliver(1, 8, bytes({3})));
  const auto deadline = Mailbox::Clock::now() + 1s;
  EXPECT_EQ(*box.take(1, 8, deadline), bytes({3}));
  EXPECT_EQ(*box.take(1, 7, deadline), bytes({1}));
  EXPECT_EQ(*box.take(1, 7, deadline), bytes({2}));
  EXPECT_EQ(box.held_bytes(), 0u);
}

TEST(Mailbox, TryTakeNeverWaitsAndReportsAFailedPeer) {
  Mailbox box(16);
  EXPECT_FALSE(box.try_take(2, 1).has_value());
  ASSERT_TRUE(box.deliver(2, 1, bytes({9})));
  EXPECT_EQ(*box.try_take(2, 1), bytes({9}));
  box.fail(2, std::make_exception_ptr(std::runtime_error("gone")));
  EXPECT_THROW(box.try_take(2, 1), std::runtime_error);
  EXPECT_FALSE(box.try_take(3, 1).has_value());
}

TEST(Mailbox, TakeTimesOutAtItsDeadline) {
  Mailbox box(16);
  const auto start = Mailbox::Clock::now();
  EXPECT_FALSE(box.take(0, 0, start + 50ms).has_value());
  EXPECT_GE(Mailbox::Clock::now() - start, 50ms);
}

TEST(Mailbox, WakesAWaitingReceiver) {
  Mailbox box(16);
  std::thread sender([&] { EXPECT_TRUE(box.deliver(2, 1, bytes({9, 9}))); });
  auto message = box.take(2, 1, Mailbox::Clock::now() + 10s);
  sender.join();
  ASSERT_TRUE(message.has_value());
  EXPECT_EQ(*message, bytes({9, 9}));
}

TEST(Mailbox, RefusesMessagesBeyondTheCap) {
  Mailbox box(3);
  EXPECT_TRUE(box.deliver(0, 0, bytes({1, 2})));
  EXPECT_FALSE(box.deliver(0, 0, bytes({3, 4})));
  EXPECT_TRUE(box.deliver(0, 0, bytes({5})));
  EXPECT_EQ(box.held_bytes(), 3u);
}

TEST(Mailbox, AMessageAReceiverWaitsForMayExceedTheCap) {
  Mailbox box(4);
  EXPECT_FALSE(box.awaited(1, 7));
  std::optional<std::vector<std::byte>> got;
  std::thread receiver([&] { got = box.take(1, 7, Mailbox::Clock::now() + 10s); });
  const auto until = Mailbox::Clock::now() + 10s;
  while (!box.awaited(1, 7) && Mailbox::Clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(box.awaited(1, 7));
  EXPECT_FALSE(box.awaited(1, 8));  // another tag is still early
  ASSERT_TRUE(box.deliver(1, 7, bytes({1, 2, 3, 4, 5, 6}), /*awaited=*/true));
  receiver.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->size(), 6u);
  EXPECT_FALSE(box.awaited(1, 7));                          // the receiver has left
  EXPECT_FALSE(box.deliver(1, 7, bytes({1, 2, 3, 4, 5})));  // early and above the cap
}

// A posted receive is counted by expect(); its driver's take() must not
// count it again, or the message after the one it waits for would pass the
// cap as awaited.
TEST(Mailbox, APostedReceiveDrivenByTakeCountsOnce) {
  // take() runs its pump after counting itself: the pump tells the test the
  // driver is inside and holds it there until the count was checked.
  class HoldInside final : public Mailbox::Pump {
   public:
    void pump() override {
      if (std::exchange(first_, false)) {
        inside.set_value();
        checked.get_future().wait();
      }
    }
    void stop() noexcept override {}
    std::promise<void> inside, checked;

   private:
    bool first_ = true;
  } hold;
  Mailbox box(4, BoundedSpin{.bound = 10s});
  box.expect(1, 7, +1);
  std::optional<std::vector<std::byte>> got;
  std::thread driver([&] {
    const Mailbox::CountedReceiver counted(1, 7);
    got = box.take(1, 7, Mailbox::Clock::now() + 10s, &hold);
  });
  hold.inside.get_future().wait();
  EXPECT_EQ(box.waiting(1, 7), 1);
  hold.checked.set_value();
  ASSERT_TRUE(box.deliver(1, 7, bytes({1, 2, 3, 4, 5, 6}), box.awaited(1, 7)));
  driver.join();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(box.waiting(1, 7), 1);  // until the posted receive ends
  box.expect(1, 7, -1);
  EXPECT_EQ(box.waiting(1, 7), 0);
  EXPECT_FALSE(box.deliver(1, 7, bytes({1, 2, 3, 4, 5}), box.awaited(1, 7)));
}

// A receiver that spins before it sleeps must see what arrives while it
// spins and what arrives between its spin and its sleep: a message missed
// there would sit until the deadline. Ping-pong with a spin of 1 us hits
// both windows many times.
TEST(Mailbox, ASpinningReceiverMissesNoMessage) {
  const BoundedSpin spin{.bound = 1us, .yield = true};
  Mailbox ping(1024, spin), pong(1024, spin);
  constexpr int kRounds = 5000;
  std::thread echo([&] {
    for (int i = 0; i < kRounds; ++i) {
      auto message = ping.take(0, 0, Mailbox::Clock::now() + 2s);
      if (!message || !pong.deliver(1, 0, std::move(*message))) return;
    }
  });
  int answered = 0;
  for (; answered < kRounds; ++answered) {
    if (!ping.deliver(0, 0, bytes({answered & 0xff}))) break;
    if (!pong.take(1, 0, Mailbox::Clock::now() + 2s)) break;
  }
  echo.join();
  EXPECT_EQ(answered, kRounds);
}

TEST(Mailbox, FailedPeerWakesReceiversAfterQueuedMessagesAreTaken) {
  Mailbox box(16);
  ASSERT_TRUE(box.deliver(3, 0, bytes({1})));
  std::thread failer(
      [&] { box.fail(3, std::make_exception_ptr(std::runtime_error("peer 3 lost"))); });
  failer.join();
  const auto deadline = Mailbox::Clock::now() + 10s;
  EXPECT_EQ(*box.take(3, 0, deadline), bytes({1}));
  EXPECT_THROW(box.take(3, 0, deadline), std::runtime_error);
  EXPECT_FALSE(box.take(4, 0, Mailbox::Clock::now() + 1ms).has_value());
  box.fail(-1, std::make_exception_ptr(std::logic_error("all lost")));
  EXPECT_THROW(box.take(4, 0, deadline), std::logic_error);
  EXPECT_THROW(box.take(3, 0, deadline), std::logic_error);  // the root cause wins
}

// A receiver counted from before it waits stops counting as it takes its
// message, under the mailbox's lock: the message behind it is early.
TEST(Mailbox, AWaitingReceiverLeavesAsItTakesItsMessage) {
  Mailbox box(100);
  const auto deadline = Mailbox::Clock::now() + std::chrono::seconds(5);
  for (const bool blocking : {true, false}) {
    Mailbox::WaitingReceiver waiting(box, 1, 7);
    EXPECT_EQ(box.waiting(1, 7), 1);
    EXPECT_TRUE(box.awaited(1, 7));
    ASSERT_TRUE(box.deliver(1, 7, std::vector<std::byte>(10), /*awaited=*/true));
    const auto message =
        blocking ? box.take(1, 7, deadline, nullptr, &waiting) : box.try_take(1, 7, &waiting);
    ASSERT_TRUE(message.has_value());
    EXPECT_EQ(box.waiting(1, 7), 0);
    EXPECT_FALSE(box.awaited(1, 7));
    EXPECT_FALSE(box.deliver(1, 7, std::vector<std::byte>(200)));  // early, over the cap
  }
}

// Entries outlive their messages and receivers (no allocation per message
// on a tag in use); sweeping the idle ones, many tags later, keeps every
// queued message and every counted receiver.
TEST(Mailbox, ManyDistinctTagsLoseNoQueuedMessageOrCountedReceiver) {
  Mailbox box(1 << 20);
  box.expect(1, 99999, +1);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(box.deliver(1, 5, bytes({i})));
  const auto deadline = Mailbox::Clock::now() + 1s;
  const int tags = 10 * static_cast<int>(Mailbox::kIdleEntriesKept);
  for (int t = 0; t < tags; ++t) {
    ASSERT_TRUE(box.deliver(2, 1000 + t, bytes({t % 256})));
    ASSERT_EQ(*box.take(2, 1000 + t, deadline), bytes({t % 256}));
    box.expect(3, 1000 + t, +1);
    box.expect(3, 1000 + t, -1);
    ASSERT_EQ(box.waiting(3, 1000 + t), 0);
  }
  EXPECT_EQ(box.waiting(1, 99999), 1);
  EXPECT_TRUE(box.awaited(1, 99999));
  EXPECT_FALSE(box.awaited(3, 1000));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(*box.take(1, 5, deadline), bytes({i}));
}

}  // namespace
}  // namespace rlx
