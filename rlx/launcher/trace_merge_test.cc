#include "rlx/launcher/trace_merge.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

namespace rlx::launcher {
namespace {

namespace fs = std::filesystem;

std::uint64_t unix_ns_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

class TraceMerge : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rlx-trace-merge-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  nlohmann::json merged() {
    std::ifstream file(dir_ / "trace.json");
    return nlohmann::json::parse(file);
  }
  fs::path dir_;
};

const std::string kCall =
    R"({"name":"all_reduce","ph":"X","pid":0,"tid":0,"dur":1.5,"ts":1795785873500858.605})";

TEST_F(TraceMerge, KeepsEveryEventOfEveryRankAndTheTimestampsAsWritten) {
  write("trace-rank-0.json", "[\n" + kCall + ",\n" + kCall + "\n]\n");
  // A rank killed mid-write: no closing bracket, and a torn last line.
  write("trace-rank-1.json", "[\n" + kCall + ",\n{\"name\":\"all_red");
  const MergedTrace result = merge_traces(dir_.string(), 0);
  EXPECT_EQ(result.path, (dir_ / "trace.json").string());
  EXPECT_EQ(result.ranks, 2u);
  EXPECT_EQ(result.calls, 3u);
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_NE(result.problems[0].find("trace-rank-1.json: 1 lines that are not trace events"),
            std::string::npos)
      << result.problems[0];
  const auto trace = merged();
  EXPECT_EQ(trace.at("traceEvents").size(), 3u);
  std::ifstream file(dir_ / "trace.json");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"ts\":1795785873500858.605"), std::string::npos);
}

TEST_F(TraceMerge, PassesOverWhatIsNotATraceAndNeverWaitsOnAFifo) {
  write("trace-rank-0.json", "[\n" + kCall + "\n" + std::string(3 << 20, 'x') + "\n" + kCall +
                                 "\n" + std::string(100000, '[') + "\n\"a string\"\n]");
  ASSERT_EQ(::mkfifo((dir_ / "trace-rank-1.json").c_str(), 0600), 0);
  fs::create_directory(dir_ / "trace-rank-2.json");
  write("unrelated.json", "{not json");
  const MergedTrace result = merge_traces(dir_.string(), 0);
  EXPECT_EQ(result.ranks, 1u);
  EXPECT_EQ(result.calls, 2u);
  std::string problems;
  for (const auto& p : result.problems) problems += p + "\n";
  EXPECT_NE(problems.find("1 lines longer than 1 MiB"), std::string::npos) << problems;
  EXPECT_NE(problems.find("2 lines that are not trace events"), std::string::npos) << problems;
  EXPECT_NE(problems.find("trace-rank-1.json: not a regular file of this user"), std::string::npos)
      << problems;
  EXPECT_EQ(merged().at("traceEvents").size(), 2u);
}

TEST_F(TraceMerge, AnEarlierJobsTracesAreNotThisOnes) {
  write("trace-rank-0.json", "[\n" + kCall + "\n]\n");
  const MergedTrace result = merge_traces(dir_.string(), unix_ns_now() + 60'000'000'000);
  EXPECT_TRUE(result.path.empty());
  EXPECT_FALSE(fs::exists(dir_ / "trace.json"));
}

}  // namespace
}  // namespace rlx::launcher
