#include "transport/endpoint.h"

#include <gtest/gtest.h>

#include "transport/errors.h"

namespace rlx {
namespace {

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
