#include "transport/congestion_control.h"

#include <cstring>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "transport/errors.h"
#include "transport/socket_io.h"

namespace rlx {
namespace {

using namespace std::chrono_literals;

sockaddr_storage ip(const char* text) {
  sockaddr_storage out{};
  if (std::strchr(text, ':') != nullptr) {
    auto& v6 = reinterpret_cast<sockaddr_in6&>(out);
    v6.sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, text, &v6.sin6_addr), 1) << text;
  } else {
    auto& v4 = reinterpret_cast<sockaddr_in&>(out);
    v4.sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, text, &v4.sin_addr), 1) << text;
  }
  return out;
}

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

std::string system_default() {
  const UniqueFd probe(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return congestion_control_of(probe.get());
}

TEST(SameHost, LoopbackPeersAndOwnAddressesAreThisHost) {
  EXPECT_TRUE(same_host(ip("10.0.0.5"), ip("127.0.0.1")));
  EXPECT_TRUE(same_host(ip("127.0.0.1"), ip("127.3.2.1")));
  EXPECT_TRUE(same_host(ip("10.0.0.5"), ip("10.0.0.5")));
  EXPECT_TRUE(same_host(ip("::1"), ip("::1")));
  EXPECT_TRUE(same_host(ip("fd00::5"), ip("fd00::5")));
  EXPECT_TRUE(same_host(ip("::ffff:10.0.0.5"), ip("10.0.0.5")));  // a dual-stack socket
  EXPECT_TRUE(same_host(ip("10.0.0.5"), ip("::ffff:127.0.0.1")));
}

TEST(SameHost, OtherAddressesAreOtherHosts) {
  EXPECT_FALSE(same_host(ip("10.0.0.5"), ip("10.0.0.6")));
  EXPECT_FALSE(same_host(ip("fd00::5"), ip("fd00::6")));
  EXPECT_FALSE(same_host(ip("10.0.0.5"), ip("::ffff:10.0.0.6")));
  EXPECT_FALSE(same_host(ip("128.0.0.1"), ip("126.0.0.1")));
  sockaddr_storage unix_socket{};
  unix_socket.ss_family = AF_UNIX;
  EXPECT_FALSE(same_host(unix_socket, unix_socket));
}

TEST(IsThisHost, LoopbackAndOwnAddressesAreThisHostAndOthersAreNot) {
  EXPECT_TRUE(is_this_host(ip("127.0.0.1")));
  EXPECT_TRUE(is_this_host(ip("127.9.9.9")));
  EXPECT_TRUE(is_this_host(ip("::1")));
  EXPECT_FALSE(is_this_host(ip("192.0.2.1")));  // TEST-NET-1: nobody's address
  // The address this host reaches itself from over a real connection.
  const auto connection = connect_over_loopback(CongestionControl::from_setting("system"));
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  ASSERT_EQ(::getsockname(connection.client.get(), reinterpret_cast<sockaddr*>(&local), &len), 0);
  EXPECT_TRUE(is_this_host(local));
  EXPECT_TRUE(same_host(connection.client.get()));
}

TEST(CongestionControl, AutoGivesSameHostConnectionsRenoOnBothEnds) {
  for (const char* setting : {"auto", ""}) {
    const auto connection = connect_over_loopback(CongestionControl::from_setting(setting));
    EXPECT_EQ(congestion_control_of(connection.client.get()), "reno") << setting;
    EXPECT_EQ(congestion_control_of(connection.server.get()), "reno") << setting;
  }
}

TEST(CongestionControl, SystemKeepsTheKernelsDefault) {
  const std::string expected = system_default();
  ASSERT_FALSE(expected.empty());
  const auto connection = connect_over_loopback(CongestionControl::from_setting("system"));
  EXPECT_EQ(congestion_control_of(connection.client.get()), expected);
  EXPECT_EQ(congestion_control_of(connection.server.get()), expected);
}

TEST(CongestionControl, ANamedAlgorithmGoesOnEveryConnection) {
  // reno and the system's default are the algorithms every process may choose.
  for (const std::string& name : {std::string("reno"), system_default()}) {
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
