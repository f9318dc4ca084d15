#include "rlx/launcher/hostfile.h"

#include <gtest/gtest.h>

#include "tests/support/expect_error.h"

namespace rlx::launcher {
namespace {

using testing::expect_error_with;

TEST(OpenMpiHostfile, ReadsSlotsCommentsAndBlankLines) {
  const auto hosts = parse_openmpi_hostfile(
      "# the cluster\n\nnode1 slots=4 max_slots=8\n  node2   # two cores\nnode3 slots=2\r\n", "f");
  EXPECT_EQ(hosts, (std::vector<HostSlots>{{"node1", 4, 8}, {"node2", 1, {}}, {"node3", 2, {}}}));
}

TEST(OpenMpiHostfile, ErrorsNameFileLineAndExpectation) {
  expect_error_with<HostfileError>([] { parse_openmpi_hostfile("a\nb slots=x\n", "hosts"); },
                                   "hosts:2: 'slots=x'");
  expect_error_with<HostfileError>([] { parse_openmpi_hostfile("a slots=0", "h"); },
                                   "h:1: 'slots=0'");
  expect_error_with<HostfileError>([] { parse_openmpi_hostfile("a cpus=2", "h"); },
                                   "unknown attribute 'cpus=2'");
  expect_error_with<HostfileError>([] { parse_openmpi_hostfile("a slots=4 max_slots=2", "h"); },
                                   "below slots=4");
  expect_error_with<HostfileError>([] { parse_openmpi_hostfile("slots=4", "h"); },
                                   "not a host name");
  expect_error_with<HostfileError>([] { parse_openmpi_hostfile("# nothing\n", "h"); }, "no hosts");
  expect_error_with<HostfileError>(
      [] { read_hostfile("/nonexistent/hostfile", std::chrono::seconds(1)); }, "cannot be read");
}

TEST(HostList, ReadsHorovodStyle) {
  EXPECT_EQ(parse_host_list("h1:2,h2,h3:4"),
            (std::vector<HostSlots>{{"h1", 2, {}}, {"h2", 1, {}}, {"h3", 4, {}}}));
  expect_error_with<HostfileError>([] { parse_host_list("h1:0"); }, "host:N");
  expect_error_with<HostfileError>([] { parse_host_list("h1,,h2"); }, "expected host");
  expect_error_with<HostfileError>([] { parse_host_list("h1:two"); }, "'h1:two'");
}

TEST(MlxHostfile, ReadsObjectsAndNames) {
  EXPECT_EQ(parse_mlx_hostfile(R"([{"ssh": "m1", "ips": ["10.0.0.1"]}, "m2"])", "f").hosts,
            (std::vector<HostSlots>{{"m1", 1, {}, "10.0.0.1"}, {"m2", 1, {}, ""}}));
  expect_error_with<HostfileError>([] { parse_mlx_hostfile("[{\"ips\": []}]", "f.json"); },
                                   "f.json: entry 0");
  expect_error_with<HostfileError>([] { parse_mlx_hostfile("{", "f.json"); }, "JSON list");
}

// mlx.launch's object form: hosts with their "ips", and "envs" for every rank.
TEST(MlxHostfile, ReadsTheObjectFormWithEnvs) {
  const HostList list = parse_mlx_hostfile(
      R"({"backend": "ring", "envs": ["A=1", "B=x=y"],
          "hosts": [{"ssh": "m1", "ips": ["10.0.0.1", "10.0.1.1"], "rdma": [null]},
                    {"ssh": "m2", "ips": []}]})",
      "f");
  EXPECT_EQ(list.hosts, (std::vector<HostSlots>{{"m1", 1, {}, "10.0.0.1"}, {"m2", 1, {}, ""}}));
  EXPECT_EQ(list.envs, (std::vector<std::string>{"A=1", "B=x=y"}));
  expect_error_with<HostfileError>([] { parse_mlx_hostfile(R"({"hosts": []})", "o.json"); },
                                   "o.json: expected");
  expect_error_with<HostfileError>(
      [] { parse_mlx_hostfile(R"({"hosts": ["m1"], "envs": ["NOEQUALS"]})", "o.json"); },
      "\"NOEQUALS\" is not \"NAME=value\"");
  expect_error_with<HostfileError>(
      [] { parse_mlx_hostfile(R"({"hosts": [{"ssh": "m1", "ips": "x"}]})", "o.json"); },
      "\"ips\" must be a list");
}

// "envs" reach every rank alike: never a rank's place in the group, and
// every value as the ranks will parse it.
TEST(MlxHostfile, EnvsMayNotPlaceRanksAndMustParse) {
  for (const char* name : {"RLX_RANK", "RLX_WORLD_SIZE", "RLX_JOB_TOKEN", "RANK", "MLX_RANK"}) {
    expect_error_with<HostfileError>(
        [name] {
          parse_mlx_hostfile(R"({"hosts": ["m1"], "envs": [")" + std::string(name) + R"(=0"]})",
                             "o.json");
        },
        "o.json: \"envs\" sets " + std::string(name) + ", which the launcher sets for each rank");
  }
  expect_error_with<HostfileError>(
      [] { parse_mlx_hostfile(R"({"hosts": ["m1"], "envs": ["RLX_TIMEOUT_S=abc"]})", "o.json"); },
      "o.json: \"envs\": RLX_TIMEOUT_S='abc' is not valid: RLX_TIMEOUT_S must be");
  EXPECT_EQ(parse_mlx_hostfile(
                R"({"hosts": ["m1"], "envs": ["RLX_TIMEOUT_S=abc", "RLX_TIMEOUT_S=5"]})", "o.json")
                .envs.size(),
            2u);  // the last one wins, as on the ranks
}

TEST(MlxHostfile, DeepNestingIsAnErrorNotACrash) {
  expect_error_with<HostfileError>(
      [] {
        parse_mlx_hostfile(std::string(100'000, '[') + std::string(100'000, ']'), "deep.json");
      },
      "deep.json: nests lists or objects more than 32 deep");
  expect_error_with<HostfileError>([] { parse_mlx_hostfile("[[[[[1]]]]]", "f.json"); },
                                   "f.json: entry 0");
}

TEST(Placement, FillsSlotsInOrderAndCountsLocalRanks) {
  const auto placed = place_ranks({{"a", 2, {}}, {"b", 1, {}}}, 3, false);
  ASSERT_EQ(placed.size(), 3u);
  EXPECT_EQ(placed[0].host, "a");
  EXPECT_EQ(placed[1].host, "a");
  EXPECT_EQ(placed[1].local_rank, 1);
  EXPECT_EQ(placed[1].local_size, 2);
  EXPECT_EQ(placed[2].host, "b");
  EXPECT_EQ(placed[2].local_rank, 0);
}

TEST(Placement, MapByNodeDealsRanksRoundRobinWithinSlots) {
  const auto placed =
      place_ranks({{"a", 3, {}}, {"b", 1, {}}, {"c", 2, {}}}, 5, false, MapBy::node);
  std::string hosts;
  for (const auto& p : placed) hosts += p.host;
  EXPECT_EQ(hosts, "abcac");  // b's one slot is full after the first round
  EXPECT_EQ(placed[3].local_rank, 1);
  EXPECT_EQ(placed[4].local_rank, 1);
  EXPECT_EQ(placed[0].local_size, 2);
  EXPECT_EQ(placed[1].local_size, 1);
  expect_error_with<HostfileError>(
      [] {
        place_ranks({{"a", 1, {}}, {"b", 1, {}}}, 3, false, MapBy::node);
      },
      "--oversubscribe");
}

TEST(Placement, MoreRanksThanSlotsNeedsOversubscribeAndRespectsMaxSlots) {
  expect_error_with<HostfileError>(
      [] {
        place_ranks({{"a", 2, {}}}, 3, false);
      },
      "--oversubscribe");
  const auto placed = place_ranks({{"a", 1, 2}, {"b", 1, {}}}, 5, true);
  int on_a = 0;
  for (const auto& p : placed) on_a += p.host == "a";
  EXPECT_EQ(on_a, 2);
  expect_error_with<HostfileError>([] { place_ranks({{"a", 1, 1}}, 2, true); }, "max_slots");
}

TEST(LocalHosts, RecognisesThisMachine) {
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  EXPECT_TRUE(is_local_host("::1"));
  EXPECT_FALSE(is_local_host("node-that-does-not-exist.invalid"));
}

}  // namespace
}  // namespace rlx::launcher
