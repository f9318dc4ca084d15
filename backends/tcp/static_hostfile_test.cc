#include "backends/tcp/static_hostfile.h"

#include <gtest/gtest.h>

#include "transport/errors.h"

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
  EXPECT_THROW(read_static_table("/nonexistent/hosts.json"), CollectiveError);
}

}  // namespace
}  // namespace rlx::tcp
