#include "backends/tcp/peer_channel.h"

#include <cstring>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include "transport/asio.h"

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

}  // namespace
}  // namespace rlx::tcp
