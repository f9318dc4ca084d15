#include "rlx/transport/endpoint.h"

#include <cstring>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

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

TEST(IsThisHost, LoopbackAndInterfaceAddressesAreThisHostAndOthersAreNot) {
  EXPECT_TRUE(is_this_host(ip("127.0.0.1")));
  EXPECT_TRUE(is_this_host(ip("127.9.9.9")));
  EXPECT_TRUE(is_this_host(ip("::1")));
  EXPECT_TRUE(is_this_host(std::string("127.0.0.1")));
  EXPECT_TRUE(is_this_host(std::string("::ffff:127.0.0.1")));
  EXPECT_FALSE(is_this_host(ip("192.0.2.1")));  // TEST-NET-1: nobody's address
  EXPECT_FALSE(is_this_host(std::string("192.0.2.1")));
  EXPECT_FALSE(is_this_host(std::string("localhost")));  // names are the caller's business
}

TEST(Endpoint, ParsesAndFormatsIpv4Ipv6AndNames) {
  EXPECT_EQ(parse_host_port("127.0.0.1:80", "x"), (HostPort{"127.0.0.1", 80}));
  EXPECT_EQ(parse_host_port("[::1]:65535", "x"), (HostPort{"::1", 65535}));
  EXPECT_EQ(parse_host_port("node-7.cluster:4000", "x"), (HostPort{"node-7.cluster", 4000}));
  EXPECT_EQ((HostPort{"::1", 9}).to_string(), "[::1]:9");
  EXPECT_EQ((HostPort{"a", 9}).to_string(), "a:9");
}

TEST(Endpoint, RejectsMalformedEndpointsNamingTheSetting) {
  for (const char* bad : {"", "host", ":80", "host:", "host:0", "host:65536", "host:8o", "[::1",
                          "[::1]80", "::1:80", "[]:80"}) {
    try {
      parse_host_port(bad, "RLX_COORDINATOR");
      FAIL() << bad;
    } catch (const CollectiveError& error) {
      EXPECT_NE(std::string(error.what()).find("RLX_COORDINATOR"), std::string::npos);
    }
  }
}

TEST(ListenAddress, LoopbackAndChosenAddressesOfThisHostAreBoundTheRestListensEverywhere) {
  EXPECT_EQ(listen_address_for("127.0.0.1", false), "127.0.0.1");
  EXPECT_EQ(listen_address_for("::1", false), "::1");
  EXPECT_EQ(listen_address_for("127.0.0.1", true), "127.0.0.1");
  EXPECT_EQ(listen_address_for("192.0.2.1", true), "0.0.0.0");  // another host's (NAT)
  EXPECT_EQ(listen_address_for("2001:db8::1", true), "::");
  EXPECT_EQ(listen_address_for("node1", true), "0.0.0.0");  // names bind nowhere
}

TEST(Endpoint, FindsTheLoopbackInterfaceAndNamesTheKnownOnes) {
  EXPECT_EQ(interface_address("lo"), "127.0.0.1");
  try {
    interface_address("no-such-if0");
    FAIL();
  } catch (const CollectiveError& error) {
    EXPECT_NE(std::string(error.what()).find("lo"), std::string::npos);
  }
}

}  // namespace
}  // namespace rlx
