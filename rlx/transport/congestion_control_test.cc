#include "rlx/transport/congestion_control.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "rlx/transport/errors.h"
#include "rlx/transport/socket_io.h"

namespace rlx {
namespace {

using namespace std::chrono_literals;

// Both ends of a real TCP connection over 127.0.0.1, set up as the mesh does.
struct LoopbackConnection {
  UniqueFd client, server;
};

LoopbackConnection connect_over_loopback(const CongestionControl& congestion) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  congestion.before_listen(listener.get());
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof address;
  EXPECT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&address), len), 0);
  EXPECT_EQ(::listen(listener.get(), 1), 0);
  EXPECT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&address), &len), 0);
  LoopbackConnection out;
  out.client =
      connect_with_retry({"127.0.0.1", ntohs(address.sin_port)}, Clock::now() + 5s, &congestion);
  out.server = UniqueFd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(out.server);
  congestion.after_accept(out.server.get());
  return out;
}

TEST(CongestionControl, AutoGivesSameHostConnectionsRenoOnBothEnds) {
  for (const char* setting : {"auto", ""}) {
    const auto connection = connect_over_loopback(CongestionControl::from_setting(setting));
    EXPECT_EQ(congestion_control_of(connection.client.get()), "reno") << setting;
    EXPECT_EQ(congestion_control_of(connection.server.get()), "reno") << setting;
  }
}

TEST(CongestionControl, SystemKeepsTheKernelsDefault) {
  const std::string expected = system_congestion_control();
  ASSERT_FALSE(expected.empty());
  const auto connection = connect_over_loopback(CongestionControl::from_setting("system"));
  EXPECT_EQ(congestion_control_of(connection.client.get()), expected);
  EXPECT_EQ(congestion_control_of(connection.server.get()), expected);
}

TEST(CongestionControl, ANamedAlgorithmGoesOnEveryConnection) {
  // reno and the system's default are the algorithms every process may choose.
  for (const std::string& name : {std::string("reno"), system_congestion_control()}) {
    const auto connection = connect_over_loopback(CongestionControl::from_setting(name));
    EXPECT_EQ(congestion_control_of(connection.client.get()), name);
    EXPECT_EQ(congestion_control_of(connection.server.get()), name);
  }
}

TEST(CongestionControl, AnAlgorithmTheKernelRefusesIsAClearError) {
  try {
    CongestionControl::from_setting("no_such_algo");
    FAIL() << "accepted an algorithm the kernel does not have";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
    const std::string text = error.what();
    EXPECT_NE(text.find("RLX_TCP_CONGESTION='no_such_algo'"), std::string::npos) << text;
    EXPECT_NE(text.find("tcp_available_congestion_control"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace rlx
