// split() at the descriptor limit, with real ranks under a lowered
// `ulimit -n`: each limit runs out at another step of setting a group up
// (its event loop, its listening socket, a connection out or in), and every
// one must be resource_exhausted naming the limit, at once. It was "ranks 1
// never connected" at RLX_CONNECT_TIMEOUT_S, or an abort on Asio's
// system_error.
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/wait.h>

#include "tests/support/subprocess.h"

namespace rlx::testing {
namespace {

using namespace std::chrono_literals;

// The "[r] RESULT kind=..." lines of rlxrun's output, one per rank.
std::vector<std::string> results(const std::string& out) {
  std::vector<std::string> found;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("] RESULT kind=") != std::string::npos) found.push_back(line);
  }
  return found;
}

// Runs SPLIT_UNTIL_FAILURE on `ranks` ranks, splitting them by rank %
// `colors`, after `prelude` (which lowers `ulimit -n` to `limit` on some of
// them) and checks that every rank leaves with the limit named, at once.
void expect_every_rank_fails_at_once(const std::string& prelude, int limit, int ranks = 2,
                                     int colors = 1) {
  const auto start = std::chrono::steady_clock::now();
  Subprocess job({RLXRUN, "-n", std::to_string(ranks), "--env", "RLX_CONNECT_TIMEOUT_S=10", "sh",
                  "-c",
                  prelude + "; exec " SPLIT_UNTIL_FAILURE " 10000 " + std::to_string(colors)});
  const Finished f = job.wait(60s);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(f.exit_code(), 0) << f.out << f.err;  // every rank saw a CollectiveError
  const auto lines = results(f.out);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(ranks)) << f.out << f.err;
  // The rank that ran out says so at the parent's split, as the others hear
  // it (or only see it go: peer_lost).
  EXPECT_NE(f.out.find(": split: resource exhausted: could not make its part of the new group "
                       "(its ranks "),
            std::string::npos)
      << f.out;
  EXPECT_NE(f.out.find("): cannot create "), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("this process's limit of " + std::to_string(limit) +
                       " open files (ulimit -n) is reached. Check: raise it"),
            std::string::npos)
      << f.out;
  for (const std::string& line : lines) {
    EXPECT_TRUE(line.find("kind=resource exhausted") != std::string::npos ||
                line.find("kind=peer lost") != std::string::npos)
        << line << "\n"
        << f.out;
  }
  EXPECT_EQ(f.out.find("never connected"), std::string::npos) << f.out;
  EXPECT_LT(took, 5s) << "not at once: " << f.out;
}

// The asan preset's UBSan checks a vptr by probing memory through a pipe:
// with no descriptor left that probe fails and it reports valid objects as
// invalid. The release and TSan builds run these cases.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUbsanNeedsDescriptors = true;
#else
constexpr bool kUbsanNeedsDescriptors = false;
#endif

TEST(DescriptorLimit, SplittingPastItIsResourceExhaustedNamingTheLimit) {
  if (kUbsanNeedsDescriptors) GTEST_SKIP() << "UBSan's vptr check needs descriptors of its own";
  for (int limit = 48; limit <= 128; limit += 8) {
    SCOPED_TRACE("ulimit -n " + std::to_string(limit) + " on both ranks");
    expect_every_rank_fails_at_once("ulimit -n " + std::to_string(limit), limit);
  }
}

// Rank 1 alone runs out, while connecting to rank 0's new listener or
// setting up its own part: rank 0, waiting for that connection, hears the
// failure over the parent group at once instead of timing out; with 3
// ranks, rank 2, retrying a connection to rank 1's listener, does too; with
// 4 ranks in 2 colors, ranks 0 and 2, whose group rank 1 is not in, fail too.
TEST(DescriptorLimit, OnlyTheConnectorRunningOutFailsItsPeerAtOnce) {
  if (kUbsanNeedsDescriptors) GTEST_SKIP() << "UBSan's vptr check needs descriptors of its own";
  for (int limit = 48; limit <= 128; limit += 8) {
    SCOPED_TRACE("ulimit -n " + std::to_string(limit) + " on rank 1");
    const std::string prelude =
        "if [ \"$RLX_RANK\" = 1 ]; then ulimit -n " + std::to_string(limit) + "; fi";
    expect_every_rank_fails_at_once(prelude, limit);
    expect_every_rank_fails_at_once(prelude, limit, 3);
    expect_every_rank_fails_at_once(prelude, limit, 4, 2);
  }
}

}  // namespace
}  // namespace rlx::testing
