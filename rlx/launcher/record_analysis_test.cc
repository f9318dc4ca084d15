#include "rlx/launcher/record_analysis.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "rlx/transport/call_record.h"
#include "rlx/transport/transport.h"

namespace rlx::launcher {
namespace {

// A directory of dumps written by real records, one per rank.
class Dumps : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rlx-analysis-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Rank `rank` of `size` finished `done` all_reduces of 4 x f32, then is
  // in `now` (nothing when its operation is null).
  CallRecord& rank(int rank, int size, std::uint64_t done) {
    auto& record = records_.emplace_back(std::make_unique<CallRecord>(64, dir_.string()));
    std::vector<int> members(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) members[static_cast<std::size_t>(r)] = r;
    record->add_group("world", rank, members);
    for (std::uint64_t i = 0; i < done; ++i) {
      record->end(record->begin(0, {"all_reduce", 4, Dtype::f32, 0}, i));
    }
    return *record;
  }

  std::vector<std::string> findings(int world_size) {
    std::vector<std::string> problems;
    const auto records = read_records(dir_.string(), problems);
    EXPECT_TRUE(problems.empty()) << problems.front();
    return find_culprits(records, world_size);
  }

  std::filesystem::path dir_;
  std::vector<std::unique_ptr<CallRecord>> records_;
};

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text;
}

TEST_F(Dumps, NamesTheRankThatNeverEnteredTheCollectiveTheOthersWaitIn) {
  for (int r : {0, 1, 3}) {
    auto& record = rank(r, 4, 7);
    record.begin(0, {"all_reduce", 4, Dtype::f32, 0}, 7);
    record.dump("SIGUSR1");
  }
  rank(2, 4, 7).dump("SIGUSR1");
  const auto lines = findings(4);
  ASSERT_EQ(lines.size(), 1u) << joined(lines);
  EXPECT_EQ(lines[0],
            "rank 2 never entered all_reduce sum of 4 x f32 #7 of group world, which ranks 0, 1, "
            "3 wait in; it last finished all_reduce sum of 4 x f32 #6, and is in no rlx call "
            "(computing, sleeping, or stuck outside rlx)");
}

TEST_F(Dumps, SaysWhereTheLateRankIsInstead) {
  rank(0, 2, 3).begin(0, {"barrier"}, 3);
  records_.back()->dump("SIGUSR1");
  rank(1, 2, 3).begin(0, {"recv", 64, Dtype::u8, -1, 0, 5}, 0);
  records_.back()->dump("SIGUSR1");
  const auto lines = findings(2);
  ASSERT_EQ(lines.size(), 1u) << joined(lines);
  EXPECT_NE(lines[0].find("rank 1 never entered barrier #3 of group world, which rank 0 waits in"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("is now in recv from rank 0 (tag 5) of group world"), std::string::npos)
      << lines[0];
}

TEST_F(Dumps, PutsMismatchedCallsSideBySide) {
  for (int r : {0, 2}) {
    rank(r, 3, 2).begin(0, {"all_reduce", 4, Dtype::f32, 0}, 2);
    records_.back()->dump("SIGUSR1");
  }
  rank(1, 3, 2).begin(0, {"broadcast", 4, Dtype::f32, -1, 0}, 2);
  records_.back()->dump("SIGUSR1");
  EXPECT_EQ(findings(3), std::vector<std::string>{
                             "ranks disagree on call #2 of group world: ranks 0, 2 called "
                             "all_reduce sum of 4 x f32; rank 1 called broadcast of 4 x f32 from "
                             "root 0"});
}

TEST_F(Dumps, NamesARankThatLeftNoRecordAndWhatTheOthersHeard) {
  for (int r : {0, 1}) {
    auto& record = rank(r, 3, 5);
    record.fail(record.begin(0, {"all_reduce", 4, Dtype::f32, 0}, 5),
                std::make_exception_ptr(std::runtime_error("peer lost: rank 2")));
  }
  const auto lines = findings(3);
  ASSERT_EQ(lines.size(), 1u) << joined(lines);
  EXPECT_EQ(lines[0],
            "rank 2 left no record (killed, or stopped before it could write one); ranks 0, 1 "
            "failed in all_reduce sum of 4 x f32 #5 of group world: peer lost: rank 2");
}

TEST_F(Dumps, FindsTheCulpritInASplitGroupByItsLabel) {
  // World ranks 1 and 3 are group "world/0:1"; rank 3 never reaches its #0.
  for (int r : {0, 1, 2, 3}) {
    auto& record = rank(r, 4, 1);
    if (r % 2 == 1) {
      const CallRecord::SplitScope splitting(0, "0:1", {1, 3});
      const auto odd = record.add_group("world", r / 2, {0, 1});
      if (r == 1) record.begin(odd, {"all_gather", 2, Dtype::i32}, 0);
    }
    record.dump("SIGUSR1");
  }
  const auto lines = findings(4);
  ASSERT_EQ(lines.size(), 1u) << joined(lines);
  EXPECT_NE(lines[0].find("rank 3 never entered all_gather of 2 x i32 #0 of group world/0:1, "
                          "which rank 1 waits in; it made no collective call in this group"),
            std::string::npos)
      << lines[0];
}

TEST_F(Dumps, RanksAtTheSameCallInDifferentStatesAreToldApart) {
  rank(0, 3, 4).dump("SIGUSR1");  // finished #3, the broadcast's root
  for (int r : {1, 2}) {
    auto& record = rank(r, 3, 3);
    record.begin(0, {"all_reduce", 4, Dtype::f32, 0}, 3);
    record.dump("SIGUSR1");
  }
  EXPECT_EQ(findings(3), std::vector<std::string>{
                             "every rank of group world entered all_reduce sum of 4 x f32 #3 of "
                             "group world; rank 0 finished it; ranks 1, 2 wait in it"});
}

// The view of a running job: what each rank is doing, alike ranks on one line.
TEST_F(Dumps, ProgressGroupsTheRanksDoingTheSameThing) {
  for (int r : {0, 2}) {
    auto& record = rank(r, 4, 3);
    record.begin(0, {"broadcast", 8, Dtype::i32, -1, 0}, 3);
    record.dump("SIGUSR1");
  }
  auto& waiting = rank(1, 4, 3);
  waiting.posted(0, {"irecv", 16, Dtype::u8, -1, 3, 9});
  waiting.dump("SIGUSR1");
  rank(3, 4, 0).dump("SIGUSR1");
  std::vector<std::string> problems;
  const auto lines = describe_progress(read_records(dir_.string(), problems));
  EXPECT_EQ(joined(lines),
            "rank 3: has made no rlx call yet\n"
            "ranks 0, 2: in broadcast of 8 x i32 from root 0 #3 of group world\n"
            "rank 1: in no rlx call; the last one, irecv from rank 3 (tag 9) of group world, "
            "posted (it may be waiting on it)\n");
}

TEST(CulpritAnalysis, NoDumpIsNoFinding) { EXPECT_TRUE(find_culprits({}, 4).empty()); }

TEST_F(Dumps, EveryRankDoneIsNoFinding) {
  for (int r : {0, 1}) rank(r, 2, 3).dump("SIGUSR1");
  EXPECT_TRUE(findings(2).empty());
}

TEST_F(Dumps, FilesThatAreNotDumpsAreNamedNotTrusted) {
  rank(0, 2, 1).dump("SIGUSR1");
  std::ofstream(dir_ / "rank-1.json") << std::string(100000, '[');
  std::ofstream(dir_ / "rank-2.json") << "{\"rank\": \"one\"}";
  ASSERT_EQ(::mkfifo((dir_ / "rank-3.json").c_str(), 0600), 0);  // nobody writes it
  std::vector<std::string> problems;
  const auto records = read_records(dir_.string(), problems);
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(problems.size(), 3u);
  for (const auto& problem : problems) {
    EXPECT_NE(problem.find("not a dump rlx can read"), std::string::npos) << problem;
  }
  const auto lines = find_culprits(records, 2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("rank 1 left no record")) << lines[0];
}

RecordedEntry collective(std::uint64_t sequence, const char* state) {
  return {.call = "all_reduce",
          .sequence = sequence,
          .count = 4,
          .dtype = "f32",
          .op = "sum",
          .state = state};
}

RankRecord world_rank(int rank, std::vector<int> members, std::vector<RecordedEntry> calls) {
  return {.rank = rank,
          .world_size = static_cast<int>(members.size()),
          .groups = {{.id = 0, .label = "world", .rank = rank, .world_ranks = std::move(members)}},
          .calls = std::move(calls)};
}

// A background collective runs on another thread's ring, so a dump may list
// a rank's #5 before its #4: the newest is the highest number.
TEST(CulpritAnalysis, TheNewestCallIsTheHighestNumberNotTheLastListed) {
  const std::vector<RankRecord> records = {
      world_rank(0, {0, 1}, {collective(5, "running"), collective(4, "done")}),
      world_rank(1, {0, 1}, {collective(4, "done")})};
  const auto lines = find_culprits(records, 2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("rank 1 never entered all_reduce sum of 4 x f32 #5"))
      << lines[0];
}

TEST(CulpritAnalysis, OnlyTheRanksThatMatterAreMissed) {
  const std::vector<RankRecord> records = {world_rank(0, {0, 1, 2}, {collective(0, "failed")})};
  const std::set<int> only_rank_2 = {2};
  const auto lines = find_culprits(records, 3, &only_rank_2);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("rank 2 left no record")) << lines[0];
}

// What a hostile dump claims is bounded: members out of range, repeated or
// negative are dropped, and a huge world is cut to what rlxrun can start.
TEST(CulpritAnalysis, HostileClaimsAreBounded) {
  RankRecord liar = world_rank(0, {0, 0, -5, 1 << 30}, {collective(3, "running")});
  liar.world_size = 1 << 30;
  liar.groups.push_back({.id = 1, .label = "world/0:1", .world_ranks = {0, 0, 1, -1, 99999999}});
  liar.calls.push_back({.group = 1, .call = "barrier", .sequence = 0, .state = "running"});
  const std::set<int> none;
  const auto lines = find_culprits({liar, world_rank(1, {0, 1}, {})}, 0, &none);
  // Rank 1 made no call in either group: one line each, no more.
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[0].starts_with("rank 1 never entered all_reduce")) << lines[0];
  EXPECT_TRUE(lines[1].starts_with("rank 1 never entered barrier #0 of group world/0:1"))
      << lines[1];
}

}  // namespace
}  // namespace rlx::launcher
