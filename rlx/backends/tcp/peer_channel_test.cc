#include "rlx/backends/tcp/peer_channel.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "rlx/transport/asio.h"

namespace rlx::tcp {
namespace {

using namespace std::chrono_literals;

// Two ranks' connection 0 in one process: each end a PeerChannel read by
// its own poller on one progress thread, into its own mailbox.
class Connection {
 public:
  Connection() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
      throw std::runtime_error("socketpair failed");
    }
    for (int side = 0; side < 2; ++side) {
      raw_[side] = UniqueFd(::dup(fds[side]));
      ends_[side].emplace(io_, UniqueFd(fds[side]), /*peer=*/1 - side, [this, side] {
        return PeerChannel::Hooks{
            .fail = [this, side](std::exception_ptr error,
                                 bool) { ends_[side]->mailbox.fail(-1, error); },
            .site =
                [](std::string_view operation, int peer) {
                  return ErrorSite{.peer = peer, .operation = std::string(operation)};
                },
            .peer_closed = [] {}};
      }());
    }
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Connection() {
    guard_.reset();
    io_.stop();
    thread_.join();
  }

  void send(int side, Tag tag, std::span<const std::byte> payload) {
    ends_[side]->channel.send({.kind = wire::FrameKind::message, .tag = tag}, payload,
                              std::chrono::steady_clock::now() + 5s, -1);
  }
  // Receives on `side` what the other side sent with `tag`; `spin_and_read`:
  // this thread reads the connection itself while it spins.
  std::optional<std::vector<std::byte>> take(int side, Tag tag, bool spin_and_read) {
    PeerChannel::Pump pump(&ends_[side]->channel);
    return ends_[side]->mailbox.take(1 - side, tag, Mailbox::Clock::now() + 5s,
                                     spin_and_read ? &pump : nullptr);
  }
  void close(int side) { ends_[side]->channel.shutdown_send(); }

  // Receives on `side` into `into` (PeerChannel::receive_into), counted as
  // a waiting receiver as the transport counts it.
  std::optional<PeerChannel::Received> receive_into(int side, Tag tag, std::span<std::byte> into,
                                                    std::chrono::milliseconds timeout = 5s) {
    Mailbox::WaitingReceiver waiting(ends_[side]->mailbox, 1 - side, tag);
    const Mailbox::CountedReceiver counted(1 - side, tag);
    return ends_[side]->channel.receive_into(
        tag, into, 1, std::chrono::steady_clock::now() + timeout, bounded_spin_for(1), -1, waiting);
  }
  bool read_by_receiver(int side) const { return ends_[side]->channel.read_by_receiver(); }
  std::optional<PeerChannel::StalledMessage> stalled_message(int side) const {
    return ends_[side]->channel.stalled_message();
  }
  Mailbox& mailbox(int side) { return ends_[side]->mailbox; }
  // Writes bytes on `side`'s socket behind its channel's back.
  void write_raw(int side, std::span<const std::byte> bytes) {
    send_all(raw_[side].get(), bytes, std::chrono::steady_clock::now() + 5s);
  }
  void write_raw(int side, std::span<const std::span<const std::byte>> parts,
                 std::chrono::milliseconds timeout) {
    send_all(raw_[side].get(), parts, std::chrono::steady_clock::now() + timeout);
  }

 private:
  struct End {
    End(boost::asio::io_context& io, UniqueFd fd, int peer, PeerChannel::Hooks hooks)
        : mailbox(1 << 20, bounded_spin_for_delivery()),
          poller(io, &PeerChannel::on_readable),
          channel(poller, std::move(fd), peer, mailbox, std::move(hooks)) {
      channel.start();
      poller.start();
    }
    Mailbox mailbox;
    ChannelPoller poller;
    PeerChannel channel;
  };
  IoContext io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_{
      io_.get_executor()};
  UniqueFd raw_[2];
  std::optional<End> ends_[2];
  std::thread thread_;
};

std::span<const std::byte> bytes_of(const int& value) {
  return std::as_bytes(std::span(&value, 1));
}

int value_of(const std::vector<std::byte>& message) {
  int value = -1;
  if (message.size() == sizeof value) std::memcpy(&value, message.data(), sizeof value);
  return value;
}

// The reader's lock passes between the progress thread and spinning
// receivers thousands of times: no hand-over may leave the connection
// unread (every take would then wait out its deadline).
TEST(PeerChannel, PingPongWithReceiversThatReadThemselvesLosesNothing) {
  Connection connection;
  constexpr int kRounds = 20000;
  std::thread echo([&] {
    for (int i = 0; i < kRounds; ++i) {
      auto message = connection.take(1, 0, /*spin_and_read=*/i % 3 != 0);
      if (!message) return;
      connection.send(1, 0, *message);
    }
  });
  int answered = 0;
  for (; answered < kRounds; ++answered) {
    connection.send(0, 0, bytes_of(answered));
    auto message = connection.take(0, 0, /*spin_and_read=*/answered % 5 != 0);
    if (!message || value_of(*message) != answered) break;
  }
  echo.join();
  EXPECT_EQ(answered, kRounds);
}

TEST(PeerChannel, MessagesNobodyWaitsForArriveThroughTheProgressThread) {
  Connection connection;
  for (int i = 0; i < 100; ++i) connection.send(0, 7, bytes_of(i));
  for (int i = 0; i < 100; ++i) {
    auto message = connection.take(1, 7, /*spin_and_read=*/false);
    ASSERT_TRUE(message.has_value());
    EXPECT_EQ(value_of(*message), i);
  }
}

TEST(PeerChannel, APeerThatClosesEndsAReceiverThatReadsItself) {
  Connection connection;
  // The sleep only makes it likely that the receiver waits when the close
  // comes; it is safe either way: a close that comes first must fail the
  // receive the same way, which is what is checked.
  std::thread closer([&] {
    std::this_thread::sleep_for(20ms);
    connection.close(0);
  });
  try {
    connection.take(1, 3, /*spin_and_read=*/true);
    ADD_FAILURE() << "a receive from a closed peer returned";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::peer_lost);
  }
  closer.join();
}

std::vector<std::byte> pattern(std::size_t length, int seed) {
  std::vector<std::byte> bytes(length);
  for (std::size_t i = 0; i < length; ++i)
    bytes[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return bytes;
}

// Waits until a receiver on `side` reads the connection in receive_into(),
// so what is sent next is read by it.
void wait_for_receiver(Connection& connection, int side) {
  while (!connection.read_by_receiver(side)) std::this_thread::yield();
}

std::vector<std::byte> frame(Tag tag, std::uint64_t sequence, std::span<const std::byte> payload) {
  const wire::EncodedHeader header = wire::encode({.kind = wire::FrameKind::message,
                                                   .tag = tag,
                                                   .sequence = sequence,
                                                   .length = payload.size()});
  std::vector<std::byte> bytes(header.size() + payload.size());
  std::memcpy(bytes.data(), header.data(), header.size());
  if (!payload.empty()) std::memcpy(bytes.data() + header.size(), payload.data(), payload.size());
  return bytes;
}

// The next message with `tag` on side 1, whichever way it came: landed in
// `into`, whole, or left in the mailbox.
std::vector<std::byte> receive_message(Connection& connection, Tag tag, std::span<std::byte> into) {
  auto received = connection.receive_into(1, tag, into);
  if (!received) return connection.take(1, tag, /*spin_and_read=*/false).value();
  if (const auto* length = std::get_if<std::size_t>(&*received)) {
    return {into.begin(), into.begin() + static_cast<std::ptrdiff_t>(*length)};
  }
  return std::get<std::vector<std::byte>>(std::move(*received));
}

TEST(PeerChannel, AMessageForAWaitingReceiverLandsInItsBufferWhole) {
  Connection connection;
  constexpr int kRounds = 20;
  constexpr std::size_t kLength = 1 << 20;
  std::atomic<int> received_rounds{0};
  // Each round's receiver, not the one before it still leaving.
  auto wait_for_round = [&](int round) {
    while (received_rounds.load() < round) std::this_thread::yield();
    wait_for_receiver(connection, 1);
  };
  std::thread sender([&] {
    for (int i = 0; i < kRounds; ++i) {
      wait_for_round(i);
      connection.send(0, 4, pattern(kLength - static_cast<std::size_t>(i) * 4096, i));
    }
    wait_for_round(kRounds);
    connection.send(0, 4, {});
  });
  std::vector<std::byte> into(kLength);
  for (int i = 0; i < kRounds; ++i) {
    auto received = connection.receive_into(1, 4, into);
    ASSERT_TRUE(received.has_value()) << "round " << i;
    ASSERT_TRUE(std::holds_alternative<std::size_t>(*received));  // no copy of our own
    const std::size_t expected = kLength - static_cast<std::size_t>(i) * 4096;
    ASSERT_EQ(std::get<std::size_t>(*received), expected);
    EXPECT_TRUE(std::equal(into.begin(), into.begin() + static_cast<std::ptrdiff_t>(expected),
                           pattern(expected, i).begin()));
    ++received_rounds;
  }
  auto empty = connection.receive_into(1, 4, into);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(std::get<std::size_t>(*empty), 0u);
  sender.join();
}

TEST(PeerChannel, AMessageTooLongForTheBufferComesWholeAndInOrder) {
  Connection connection;
  std::thread sender([&] {
    wait_for_receiver(connection, 1);
    connection.send(0, 2, pattern(300, 1));  // longer than the buffer
    connection.send(0, 2, pattern(100, 2));
  });
  std::vector<std::byte> into(200);
  auto next_message = [&] { return receive_message(connection, 2, into); };
  EXPECT_EQ(next_message(), pattern(300, 1));
  EXPECT_EQ(next_message(), pattern(100, 2));
  sender.join();
}

// A sender that stops halfway through a message: the receiver leaves at its
// deadline, and its buffer is not written after that; the message arrives
// whole for the next receive once the rest comes.
TEST(PeerChannel, AReceiverThatTimesOutHalfwayThroughItsMessageLeavesItWholeForLater) {
  Connection connection;
  constexpr std::size_t kLength = 1 << 20;
  const std::vector<std::byte> message = pattern(kLength, 9);
  const wire::EncodedHeader header =
      wire::encode({.kind = wire::FrameKind::message, .tag = 6, .length = kLength});
  std::thread sender([&] {
    wait_for_receiver(connection, 1);
    connection.write_raw(0, header);
    connection.write_raw(0, std::span(message).first(kLength / 2));
  });
  std::vector<std::byte> into(kLength, std::byte{0});
  auto received = connection.receive_into(1, 6, into, 300ms);
  sender.join();
  EXPECT_FALSE(received.has_value());
  const std::vector<std::byte> into_after_timeout = into;

  connection.write_raw(0, std::span(message).subspan(kLength / 2));
  auto later = connection.take(1, 6, /*spin_and_read=*/false);
  ASSERT_TRUE(later.has_value());
  EXPECT_EQ(*later, message);
  EXPECT_EQ(into, into_after_timeout);
}

// The progress thread began a message before the receiver came; the one
// after it, of the same tag, must not land first.
TEST(PeerChannel, AMessageBegunBeforeTheReceiverCameIsReceivedBeforeTheNext) {
  Connection connection;
  const std::vector<std::byte> first = pattern(1 << 19, 1), second = pattern(100, 2);
  const std::vector<std::byte> first_frame = frame(8, 0, first);
  const std::size_t half = first_frame.size() / 2;
  connection.write_raw(0, std::span(first_frame).first(half));
  for (;;) {
    const auto stalled = connection.stalled_message(1);
    if (stalled && stalled->arrived == half - wire::kFrameHeaderBytes) break;
    std::this_thread::yield();
  }
  std::thread sender([&] {
    wait_for_receiver(connection, 1);
    connection.write_raw(0, std::span(first_frame).subspan(half));
    connection.write_raw(0, frame(8, 1, second));
  });
  std::vector<std::byte> into(1 << 20);
  auto next_message = [&] { return receive_message(connection, 8, into); };
  EXPECT_EQ(next_message(), first);
  sender.join();
  EXPECT_EQ(next_message(), second);
}

// Once its message landed the receiver stops reading: the message behind
// it, nobody's yet, is held as early and meets the cap (1 MiB here).
TEST(PeerChannel, AMessageBehindALandedOneCountsAgainstTheCap) {
  Connection connection;
  std::thread sender([&] {
    wait_for_receiver(connection, 1);
    const std::vector<std::byte> landing = frame(5, 0, pattern(1000, 1));
    const std::vector<std::byte> too_long = frame(5, 1, pattern(2 << 20, 2));
    const std::span<const std::byte> both[] = {landing, too_long};
    try {
      connection.write_raw(0, both, 300ms);
    } catch (const IoError&) {
      // Expected: nobody reads the rest once the cap failed the connection.
    }
  });
  std::vector<std::byte> into(1000);
  auto received = connection.receive_into(1, 5, into);
  sender.join();
  ASSERT_TRUE(received.has_value());
  EXPECT_EQ(std::get<std::size_t>(*received), 1000u);
  // try_take, unlike take, does not count as a waiting receiver.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  for (;;) {
    try {
      ASSERT_FALSE(connection.mailbox(1).try_take(0, 5).has_value())
          << "a message over the cap that nobody waited for was held";
    } catch (const CollectiveError& error) {
      EXPECT_EQ(error.kind(), ErrorKind::resource_exhausted);
      break;
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the cap was never applied";
    std::this_thread::yield();
  }
}

}  // namespace
}  // namespace rlx::tcp
