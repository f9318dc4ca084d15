#include "rlx/launcher/agent_request.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace rlx::launcher {
namespace {

const AgentRequest kRequest{
    .environment = {"RLX_RANK=3", "RLX_JOB_TOKEN=secret", "EMPTY=", "WITH_NEWLINE=a\nb"},
    .cwd = "/home/some dir",
    .argv = {"./prog", "--flag", "", "two words"},
    .bind_to = BindTo::core,
    .local_rank = 2,
    .local_size = 4};

// "RLXAGENT2\n" and then each field NUL-terminated.
std::string request_of(std::initializer_list<std::string_view> fields) {
  std::string out = "RLXAGENT2\n";
  for (auto field : fields) (out += field) += '\0';
  return out;
}

void expect_rejected(std::string_view bytes, const std::string& fragment) {
  try {
    decode_agent_request(bytes);
    FAIL() << "accepted";
  } catch (const AgentRequestError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(AgentRequest, RoundTripsEveryFieldIncludingEmptyOnesAndNewlines) {
  EXPECT_EQ(decode_agent_request(encode_agent_request(kRequest)), kRequest);
}

TEST(AgentRequest, ReadingFromAPipeLeavesWhatFollowsForTheRank) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const std::string bytes = encode_agent_request(kRequest) + "the rank's stdin\n";
  ASSERT_EQ(write(fds[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fds[1]);
  EXPECT_EQ(read_agent_request(fds[0]), kRequest);
  char rest[64] = {};
  EXPECT_EQ(read(fds[0], rest, sizeof rest), 17);
  EXPECT_STREQ(rest, "the rank's stdin\n");
  close(fds[0]);
}

TEST(AgentRequest, MalformedRequestsSayWhatIsWrong) {
  const std::string good = encode_agent_request(kRequest);
  expect_rejected("", "ended inside the header");
  expect_rejected("SSH-2.0-OpenSSH\n", "does not start with RLXAGENT2");
  expect_rejected(good.substr(0, good.size() - 3), "ended inside the local rank");
  expect_rejected(good + "x", "1 bytes after it");
  expect_rejected(request_of({"99999"}), "not a count from 0 to 4096");
  expect_rejected(request_of({"-1"}), "not a count from 0 to 4096");
  expect_rejected(request_of({"1", "NOEQUALS"}), "without NAME=");
  expect_rejected(request_of({"0", "/", "0"}), "no program to run");
  expect_rejected(request_of({"0", "/", "1", "p", "5", "0", "1"}), "names no binding");
  expect_rejected(request_of({"0", "/", "1", "p", "2", "1", "1"}), "local rank 1 among 1");
  expect_rejected(request_of({"0", "/", "1", "p", "2", "0"}), "ended inside the local size");
  expect_rejected(request_of({"1", "A=" + std::string(std::size_t{2} << 20, 'x')}),
                  "larger than 1 MiB");
}

}  // namespace
}  // namespace rlx::launcher
