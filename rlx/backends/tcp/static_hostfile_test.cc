#include "rlx/backends/tcp/static_hostfile.h"

#include <gtest/gtest.h>

#include "rlx/transport/errors.h"

namespace rlx::tcp {
namespace {

TEST(StaticHostfile, ReadsEveryAcceptedShape) {
  EXPECT_EQ(parse_static_table(R"(["127.0.0.1:5000", "[::1]:5001"])", "f"),
            (std::vector<HostPort>{{"127.0.0.1", 5000}, {"::1", 5001}}));
  EXPECT_EQ(parse_static_table(R"([["node1:7000", "10.0.0.1:7000"], ["node2:7000"]])", "f"),
            (std::vector<HostPort>{{"node1", 7000}, {"node2", 7000}}));
  EXPECT_EQ(parse_static_table(R"([{"host": "a", "port": 1}])", "f"),
            (std::vector<HostPort>{{"a", 1}}));
}

TEST(StaticHostfile, ErrorsNameTheFileAndTheEntry) {
  auto expect_error = [](const std::string& text, const std::string& fragment) {
    try {
      parse_static_table(text, "hosts.json");
      FAIL() << text;
    } catch (const CollectiveError& error) {
      EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  expect_error("[", "hosts.json: is not valid JSON");
  expect_error("{}", "non-empty JSON list");
  expect_error("[]", "non-empty JSON list");
  expect_error(R"(["a:1", 5])", "entry 1");
  expect_error(R"(["a:0"])", "invalid port");
  expect_error(R"(["::1:5"])", "without [brackets]");
  expect_error(R"([{"host": "a", "port": 70000}])", "out of range");
  expect_error(R"([{"host": "", "port": 1}])", "is not a host name");
}

// A hostile table costs a bounded excerpt in the message, never a crash
// (100,000 brackets overflowed the stack in nlohmann's dump()) or a
// message as long as the file.
TEST(StaticHostfile, DeepOrHugeTablesAreRefusedWithShortMessages) {
  auto error_of = [](const std::string& text) {
    try {
      parse_static_table(text, "hosts.json");
    } catch (const CollectiveError& error) {
      EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
      return std::string(error.what());
    }
    ADD_FAILURE() << "accepted";
    return std::string();
  };
  const std::string deep = error_of(std::string(100'000, '[') + std::string(100'000, ']'));
  EXPECT_NE(deep.find("hosts.json: nests lists or objects more than 32 deep"), std::string::npos)
      << deep;
  const std::string long_host = error_of("[\"" + std::string(1 << 20, 'h') + ":1\"]");
  EXPECT_NE(long_host.find("(1 MiB in all)"), std::string::npos) << long_host.substr(0, 300);
  const std::string long_entry = error_of("[{\"x\": \"" + std::string(1 << 20, 'x') + "\"}]");
  EXPECT_LT(long_entry.size(), 1000u);
  for (const std::string* message : {&deep, &long_host, &long_entry}) {
    EXPECT_LT(message->size(), 1000u) << message->substr(0, 300);
  }
}

TEST(StaticHostfile, ErrorsNameTheVariableTheTableCameFrom) {
  launch_env::LaunchEnv env;
  env.hostfile = "/nonexistent/hosts.json";
  auto message_of = [&env] {
    try {
      read_static_table(env);
    } catch (const CollectiveError& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message_of().find("read RLX_HOSTFILE: invalid argument: /nonexistent/hosts.json: "
                              "cannot be read"),
            std::string::npos)
      << message_of();
  env.group_source = launch_env::GroupSource::mlx;
  EXPECT_NE(message_of().find("read MLX_HOSTFILE"), std::string::npos) << message_of();
  EXPECT_EQ(message_of().find("RLX_HOSTFILE"), std::string::npos) << message_of();
}

}  // namespace
}  // namespace rlx::tcp
