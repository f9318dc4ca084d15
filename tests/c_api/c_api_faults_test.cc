// A C program's view of a failed peer: a status of the failure's kind, the
// rank to blame, and the error text naming it, on the rank that survived.
#include <csignal>

#include <gtest/gtest.h>

#include "tests/support/job_harness.h"

namespace rlx::testing {
namespace {

JobOutcome run_mode(const std::string& mode) {
  return run_job({.ranks = 2,
                  .argv = {sibling_program("c_api_faults"), mode},
                  .env = {"RLX_BACKEND=tcp", "RLX_TIMEOUT_S=2"},
                  .limit = std::chrono::seconds(30)});
}

TEST(CApiFaults, APeerThatExitedIsPeerLostBlamingIt) {
  const JobOutcome job = run_mode("peer_exits");
  ASSERT_EQ(job.ranks.size(), 2u);
  const RankOutcome& survivor = job.ranks[0];
  EXPECT_TRUE(survivor.exited_ok()) << survivor.err;
  EXPECT_NE(survivor.out.find("RESULT rank=0 status=peer_lost peer=1 "), std::string::npos)
      << survivor.out << survivor.err;
  EXPECT_NE(survivor.out.find("all_reduce"), std::string::npos) << survivor.out;
  EXPECT_NE(survivor.out.find("rank 1"), std::string::npos) << survivor.out;
}

TEST(CApiFaults, AStoppedPeerIsATimeoutBlamingIt) {
  const JobOutcome job = run_mode("peer_frozen");
  ASSERT_EQ(job.ranks.size(), 2u);
  const RankOutcome& survivor = job.ranks[0];
  EXPECT_TRUE(survivor.exited_ok()) << survivor.err;
  EXPECT_NE(survivor.out.find("RESULT rank=0 status=timeout peer=1 "), std::string::npos)
      << survivor.out << survivor.err;
  EXPECT_NE(survivor.out.find("rank 1 does not answer"), std::string::npos) << survivor.out;
  EXPECT_TRUE(job.ranks[1].killed_by(SIGKILL));
}

}  // namespace
}  // namespace rlx::testing
