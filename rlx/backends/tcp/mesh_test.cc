#include "rlx/backends/tcp/mesh.h"

#include <thread>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "rlx/transport/asio.h"
#include "rlx/transport/pending_handshakes.h"

namespace rlx::tcp {
namespace {

using namespace std::chrono_literals;

// More silent strangers than a port takes at once arrive before the rank's
// peer: the oldest are evicted after their grace, and the peer gets in.
TEST(Mesh, SilentStrangersFillingThePortAreEvictedSoThePeerStillGetsIn) {
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread progress([&] { io.run(); });
  const MeshSpec lower{.rank = 0, .world_size = 2, .lanes = 1, .token = "t"};
  Listener listener(io, "127.0.0.1", 0, lower);
  const HostPort address{"127.0.0.1", listener.port()};

  std::vector<UniqueFd> strangers;
  const std::size_t count = PendingHandshakes::default_limit() + 20;
  for (std::size_t i = 0; i < count; ++i) {
    strangers.push_back(connect_with_retry(address, Clock::now() + 10s));
  }
  const auto start = Clock::now();
  const MeshSpec upper{.rank = 1, .world_size = 2, .lanes = 1, .token = "t"};
  auto connect_both = [&] {
    for (int index = 0; index <= upper.lanes; ++index) {
      connect_to_peer(address, 0, index, upper, Clock::now() + 8s);
    }
  };
  EXPECT_NO_THROW(connect_both());
  EXPECT_NO_THROW(listener.wait_for_peers(Clock::now() + 8s));
  // Strangers wait out their grace (1 s) before eviction, not the 10 s handshake limit.
  EXPECT_LT(Clock::now() - start, 8s);

  work.reset();
  io.stop();
  progress.join();
}

// Both ends of every mesh connection run what the spec's congestion control
// gives them: reno between ranks of one host by default, the system's
// algorithm when told to keep it.
TEST(Mesh, BothEndsOfEveryConnectionRunTheChosenCongestionControl) {
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread progress([&] { io.run(); });
  const std::string system_default = system_congestion_control();
  for (const char* setting : {"auto", "system"}) {
    const auto congestion = CongestionControl::from_setting(setting);
    const MeshSpec lower{
        .rank = 0, .world_size = 2, .lanes = 2, .token = "t", .congestion = congestion};
    const MeshSpec upper{
        .rank = 1, .world_size = 2, .lanes = 2, .token = "t", .congestion = congestion};
    Listener listener(io, "127.0.0.1", 0, lower);
    std::vector<UniqueFd> ends;
    for (int index = 0; index <= upper.lanes; ++index) {
      ends.push_back(
          connect_to_peer({"127.0.0.1", listener.port()}, 0, index, upper, Clock::now() + 8s));
    }
    auto accepted = listener.wait_for_peers(Clock::now() + 8s);
    for (auto& fd : accepted[1]) ends.push_back(std::move(fd));
    ASSERT_EQ(ends.size(), 6u);
    const std::string expected = std::string(setting) == "auto" ? "reno" : system_default;
    for (const auto& fd : ends) EXPECT_EQ(congestion_control_of(fd.get()), expected) << setting;
  }
  work.reset();
  io.stop();
  progress.join();
}

}  // namespace
}  // namespace rlx::tcp
