// The address choice reads sysfs; these cases build small sysfs-shaped trees
// so every rule is checked on any host (the VM tests check a real device).
#include "rlx/backends/verbs/device.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

namespace rlx::verbs {
namespace {

namespace fs = std::filesystem;

TEST(AddressInGid, ReadsIpv4MappedAndGlobalIpv6Gids) {
  EXPECT_EQ(address_in_gid("0000:0000:0000:0000:0000:ffff:c0a8:4d01"), "192.168.77.1");
  EXPECT_EQ(address_in_gid("fd00:0000:0000:0000:0000:0000:0000:0002"), "fd00::2");
  EXPECT_EQ(address_in_gid("fe80:0000:0000:0000:a068:d1ff:fe8d:a9c3"), std::nullopt);
  EXPECT_EQ(address_in_gid("0000:0000:0000:0000:0000:0000:0000:0000"), std::nullopt);
  EXPECT_EQ(address_in_gid("garbage"), std::nullopt);
}

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rlx-sysfs-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const fs::path& relative, const std::string& text) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text << "\n";
  }
  void port(const std::string& device, int port, const std::string& state) {
    write(device + "/ports/" + std::to_string(port) + "/state", state);
  }
  void gid(const std::string& device, int port, int index, const std::string& gid,
           const std::string& type) {
    const std::string base = device + "/ports/" + std::to_string(port);
    write(base + "/gids/" + std::to_string(index), gid);
    write(base + "/gid_attrs/types/" + std::to_string(index), type);
  }
  std::string choose(const DeviceSettings& settings) {
    return rdma_port_address(settings, {.operation = "test"}, root_.string());
  }
  fs::path root_;
};

TEST_F(FakeSysfs, PrefersARoceV2Ipv4GidOnTheFirstActivePort) {
  port("mlx5_0", 1, "1: DOWN");
  gid("mlx5_0", 1, 1, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2");
  port("rxe0", 1, "4: ACTIVE");
  gid("rxe0", 1, 0, "fe80:0000:0000:0000:a068:d1ff:fe8d:a9c3", "RoCE v2");
  gid("rxe0", 1, 1, "0000:0000:0000:0000:0000:ffff:c0a8:4d01", "RoCE v1");
  gid("rxe0", 1, 2, "0000:0000:0000:0000:0000:ffff:c0a8:4d01", "RoCE v2");
  EXPECT_EQ(choose({}), "192.168.77.1");
}

TEST_F(FakeSysfs, HonoursDevicePortAndGidIndex) {
  port("a0", 1, "4: ACTIVE");
  gid("a0", 1, 0, "0000:0000:0000:0000:0000:ffff:0a00:0001", "RoCE v2");
  port("b0", 1, "4: ACTIVE");
  port("b0", 2, "4: ACTIVE");
  gid("b0", 2, 0, "0000:0000:0000:0000:0000:ffff:0a00:0002", "RoCE v2");
  gid("b0", 2, 3, "0000:0000:0000:0000:0000:ffff:0a00:0003", "RoCE v2");
  EXPECT_EQ(choose({}), "10.0.0.1");
  EXPECT_EQ(choose({.device = "b0"}), "10.0.0.2");
  EXPECT_EQ(choose({.device = "b0", .port = 2, .gid_index = 3}), "10.0.0.3");
}

TEST_F(FakeSysfs, ExplainsWhatIsMissing) {
  port("a0", 1, "1: DOWN");
  try {
    choose({.device = "a0", .port = 1});
    FAIL() << "expected an error";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::backend_unavailable);
    EXPECT_NE(std::string(error.what()).find("a0 port 1 is not active"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(choose({.device = "zz9"}), CollectiveError);
  fs::remove_all(root_);
  try {
    choose({});
    FAIL() << "expected an error";
  } catch (const CollectiveError& error) {
    EXPECT_NE(std::string(error.what()).find("RDMA devices here: none"), std::string::npos)
        << error.what();
  }
}

TEST(DeviceSettings, LoopbackAddressesHaveNoRdmaDevice) {
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_FALSE(is_loopback_address("192.168.77.1"));
}

}  // namespace
}  // namespace rlx::verbs
