#include "rlx/transport/call_record.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rlx/transport/launch_env.h"
#include "rlx/transport/transport.h"

namespace rlx {
namespace {

nlohmann::json calls_of(CallRecord& record) {
  return nlohmann::json::parse(record.to_json("test")).at("calls");
}

TEST(CallRecord, KeepsEachThreadsLastCallsWithTheirShapeAndState) {
  CallRecord record(4, "");
  const auto world = record.add_group("world", 1, {0, 1, 2});
  for (std::uint64_t i = 0; i < 6; ++i) {
    record.end(record.begin(world, {"all_reduce", 10 + i, Dtype::f32, 0}, i));
  }
  const auto running = record.begin(world, {"broadcast", 3, Dtype::i64, -1, 2, (1 << 24) - 1}, 6);
  const auto calls = calls_of(record);
  ASSERT_EQ(calls.size(), 4u);  // the ring keeps the newest 4
  EXPECT_EQ(calls[0].at("sequence"), 3);
  EXPECT_EQ(calls[0].at("count"), 13);
  EXPECT_EQ(calls[0].at("op"), "sum");
  EXPECT_EQ(calls[0].at("state"), "done");
  EXPECT_FALSE(calls[0].contains("start_ns"));  // no service thread keeps time without a dump dir
  EXPECT_EQ(calls[3].at("call"), "broadcast");
  EXPECT_EQ(calls[3].at("dtype"), "i64");
  EXPECT_EQ(calls[3].at("peer"), 2);
  EXPECT_EQ(calls[3].at("state"), "running");
  EXPECT_EQ(calls[3].at("tag"), (1 << 24) - 1);  // the largest user tag
  EXPECT_FALSE(calls[3].contains("op"));
  record.end(running);
  EXPECT_EQ(calls_of(record)[3].at("state"), "done");
}

TEST(CallRecord, AFailedCallKeepsItsErrorAndDumpsItself) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-record-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  CallRecord record(16, dir.string());
  record.add_group("world", 2, {0, 1, 2});
  const auto ticket = record.begin(0, {"recv", 8, Dtype::u8, -1, 1, 7}, 0);
  record.fail(ticket, std::make_exception_ptr(std::runtime_error("rank 1 went away")));
  std::ifstream file(dir / "rank-2.json");
  ASSERT_TRUE(file.good()) << "no dump in " << dir;
  const auto dump = nlohmann::json::parse(file);
  EXPECT_EQ(dump.at("rank"), 2);
  EXPECT_EQ(dump.at("world_size"), 3);
  EXPECT_EQ(dump.at("reason"), "a call failed");
  EXPECT_EQ(dump.at("groups")[0].at("label"), "world");
  const auto& call = dump.at("calls")[0];
  EXPECT_EQ(call.at("state"), "failed");
  EXPECT_EQ(call.at("error"), "rank 1 went away");
  EXPECT_EQ(call.at("tag"), 7);
  EXPECT_EQ(call.at("peer"), 1);
  std::filesystem::remove_all(dir);
}

// A dump never throws in place of the call's own error: bytes that are not
// UTF-8 in an error's text, or no exception at all.
TEST(CallRecord, AnyFailureTextDumps) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-record-bytes-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  CallRecord record(8, dir.string());
  record.add_group("world", 0, {0});
  record.fail(record.begin(0, {"recv"}, 0),
              std::make_exception_ptr(std::runtime_error("bad \xff\xfe bytes")));
  record.fail(record.begin(0, {"recv"}, 0), nullptr);
  std::ifstream file(dir / "rank-0.json");
  const auto calls = nlohmann::json::parse(file).at("calls");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].at("state"), "failed");
  EXPECT_NE(calls[0].at("error").get<std::string>().find("bad "), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(CallRecord, ASplitIsLabelledAndNamesWorldRanks) {
  CallRecord record(8, "");
  const auto world = record.add_group("world", 3, {0, 1, 2, 3});
  {
    const CallRecord::SplitScope splitting(world, "0:1", {1, 3});
    record.add_group("world", 1, {0, 1});  // as a transport's constructor registers itself
  }
  record.add_group("world", 0, {0});  // after the split: not the split's
  const auto groups = nlohmann::json::parse(record.to_json("test")).at("groups");
  EXPECT_EQ(groups[1].at("label"), "world/0:1");
  EXPECT_EQ(groups[1].at("world_ranks"), nlohmann::json({1, 3}));
  EXPECT_EQ(groups[2].at("label"), "world");
}

TEST(CallRecord, OffRecordsNothing) {
  CallRecord record(0, "");
  record.add_group("world", 0, {0});
  const auto ticket = record.begin(0, {"barrier"}, 0);
  EXPECT_EQ(ticket.ring, nullptr);
  record.end(ticket);
  EXPECT_TRUE(calls_of(record).empty());
}

TEST(CallRecord, ThreadsRecordAtOnceWhileADumpReads) {
  CallRecord record(64, "");
  record.add_group("world", 0, {0});
  std::atomic<bool> stop{false};
  std::atomic<int> warmed_up{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&record, &stop, &warmed_up] {
      // All three run at once (a thread that ended would hand its ring on).
      for (std::uint64_t i = 0; !stop.load(); ++i) {
        record.end(record.begin(0, {"send", i}, i));
        if (i == 200) ++warmed_up;
      }
    });
  }
  while (warmed_up.load() < 3) std::this_thread::yield();
  // An entry that is read whole is never two calls' halves.
  for (int i = 0; i < 50; ++i) {
    for (const auto& call : calls_of(record)) EXPECT_EQ(call.at("count"), call.at("sequence"));
  }
  stop = true;
  for (auto& t : threads) t.join();
  // Each thread's ring keeps its own last 64.
  const auto calls = calls_of(record);
  EXPECT_EQ(calls.size(), 3u * 64u);
  std::set<int> threads_seen;
  for (const auto& call : calls) threads_seen.insert(call.at("thread").get<int>());
  EXPECT_EQ(threads_seen.size(), 3u);
}

TEST(CallRecord, AnEndedThreadsRingIsKeptThenReused) {
  CallRecord record(8, "");
  record.add_group("world", 0, {0});
  std::thread([&] { record.end(record.begin(0, {"barrier"}, 0)); }).join();
  std::thread([&] { record.end(record.begin(0, {"barrier"}, 1)); }).join();
  const auto calls = calls_of(record);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].at("thread"), calls[1].at("thread"));
}

TEST(CallRecord, WithADumpDirItKeepsTimeAndAnswersADumpOfItsOwn) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-record-time-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    CallRecord record(8, dir.string());
    record.add_group("world", 0, {0, 1});
    const auto ticket = record.begin(0, {"all_gather", 4, Dtype::f64}, 0);
    const auto call = calls_of(record)[0];
    EXPECT_GT(call.at("start_ns").get<std::uint64_t>(), 0u);
    EXPECT_EQ(call.at("state"), "running");
    EXPECT_EQ(record.dump("asked"), (dir / "rank-0.json").string());
    record.end(ticket);
    // Touching the request file is how rlxrun asks: the service thread,
    // which looks every 10 ms, answers with a dump.
    std::ofstream(dir / std::string(launch_env::kDumpRequestFile)) << "now\n";
    std::string reason;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (reason.find("request") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::ifstream file(dir / "rank-0.json");
      try {
        reason = nlohmann::json::parse(file).at("reason");
      } catch (const nlohmann::json::exception&) {
      }
    }
    EXPECT_EQ(reason, "asked for (the dump request file)");
  }
  std::filesystem::remove_all(dir);
}

TEST(CallRecord, ACallKeepsTheFirstChoiceItNotesAndWhenItEnded) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-record-choice-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    CallRecord record(8, dir.string());
    record.add_group("world", 0, {0, 1});
    record.note_choice("ring", "network");  // no call runs: nothing to note
    const auto ticket = record.begin(0, {"all_reduce", 4, Dtype::f32, 0}, 0);
    record.note_choice("hierarchical", "hierarchical");
    record.note_choice("ring", "network");  // a step of the hierarchical call
    record.end(ticket);
    record.end(record.begin(0, {"barrier"}, 1));
    const auto calls = calls_of(record);
    EXPECT_EQ(calls[0].at("algorithm"), "hierarchical");
    EXPECT_EQ(calls[0].at("path"), "hierarchical");
    EXPECT_GE(calls[0].at("end_ns").get<std::uint64_t>(),
              calls[0].at("start_ns").get<std::uint64_t>());
    EXPECT_FALSE(calls[1].contains("algorithm"));
  }
  std::filesystem::remove_all(dir);
}

TEST(CallRecord, APostedReceiveIsRecordedAsPosted) {
  CallRecord record(8, "");
  record.add_group("world", 0, {0, 1});
  record.posted(0, {"irecv", 8, Dtype::u8, -1, 1, 3});
  record.end(record.begin(0, {"barrier"}, 0));
  const auto calls = calls_of(record);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].at("call"), "irecv");
  EXPECT_EQ(calls[0].at("state"), "posted");
  EXPECT_EQ(calls[0].at("peer"), 1);
  EXPECT_EQ(calls[1].at("state"), "done");
}

// The trace file's events, parsed as Chrome's JSON array format.
nlohmann::json trace_events(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

std::vector<nlohmann::json> of_phase(const nlohmann::json& events, std::string_view phase) {
  std::vector<nlohmann::json> found;
  for (const auto& e : events) {
    if (e.at("ph") == phase) found.push_back(e);
  }
  return found;
}

TEST(CallRecord, ATraceHoldsEveryCallAsAChromeEvent) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-record-trace-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    CallRecord record(8, "", dir.string());
    record.add_group("world", 1, {0, 1});
    for (std::uint64_t i = 0; i < 6; ++i) {
      const auto ticket = record.begin(0, {"all_reduce", 1 + i, Dtype::f32, 0}, i);
      record.note_choice("recursive_doubling", "network");
      record.end(ticket);
    }
    record.flush_trace(false);
    record.end(record.begin(0, {"send", 16, Dtype::u8, -1, 0, 5}, 0));
    record.fail(record.begin(0, {"barrier"}, 6),
                std::make_exception_ptr(std::runtime_error("rank 0 went away")));
    record.begin(0, {"broadcast", 2, Dtype::i32, -1, 0}, 7);  // still running at the end
    record.flush_trace(true);
    record.end(record.begin(0, {"barrier"}, 8));  // after the trace closed: untraced
    record.flush_trace(true);
  }
  const auto events = trace_events(dir / "trace-rank-1.json");
  const auto calls = of_phase(events, "X");
  ASSERT_EQ(calls.size(), 9u);
  EXPECT_EQ(calls[0].at("name"), "all_reduce");
  EXPECT_EQ(calls[0].at("cat"), "collective");
  EXPECT_EQ(calls[0].at("pid"), 1);
  EXPECT_EQ(calls[0].at("args").at("algorithm"), "recursive_doubling");
  EXPECT_EQ(calls[0].at("args").at("op"), "sum");
  EXPECT_EQ(calls[5].at("args").at("count"), 6);
  EXPECT_EQ(calls[6].at("cat"), "point_to_point");
  EXPECT_EQ(calls[6].at("args").at("tag"), 5);
  EXPECT_EQ(calls[7].at("args").at("state"), "failed");
  EXPECT_EQ(calls[7].at("args").at("error"), "rank 0 went away");
  EXPECT_EQ(calls[8].at("args").at("state"), "running");
  for (std::size_t i = 1; i < calls.size(); ++i) {
    EXPECT_GE(calls[i].at("ts").get<double>(), calls[i - 1].at("ts").get<double>());
    EXPECT_GE(calls[i].at("dur").get<double>(), 0.0);
  }
  // Wall-clock microseconds, so ranks of different hosts line up.
  const double now_us =
      std::chrono::duration<double, std::micro>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  EXPECT_NEAR(calls[0].at("ts").get<double>(), now_us, 60e6);
  bool named_world = false;
  for (const auto& meta : of_phase(events, "M")) {
    if (meta.at("name") == "thread_name" && meta.at("tid") == calls[0].at("tid")) {
      named_world = meta.at("args").at("name").get<std::string>().starts_with("world");
    }
  }
  EXPECT_TRUE(named_world);
  std::filesystem::remove_all(dir);
}

// A ring of 4 and 40 calls: a call that would overwrite one not yet in the
// trace writes the trace first.
TEST(CallRecord, ATraceKeepsEveryCallThoughTheRingIsSmall) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-record-small-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    CallRecord record(4, "", dir.string());
    record.add_group("world", 0, {0});
    for (std::uint64_t i = 0; i < 40; ++i) record.end(record.begin(0, {"barrier"}, i));
  }
  const auto calls = of_phase(trace_events(dir / "trace-rank-0.json"), "X");
  ASSERT_EQ(calls.size(), 40u);
  for (std::size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i].at("args").at("sequence"), i);
  std::filesystem::remove_all(dir);
}

// Threads that record at once, each writing the trace when its small ring
// is full, while the service thread writes it too: every call, once.
TEST(CallRecord, ThreadsTracingAtOnceLoseNoCall) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-record-threads-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  constexpr int kThreads = 4;
  constexpr std::uint64_t kCalls = 3000;
  {
    CallRecord record(16, "", dir.string());
    record.add_group("world", 0, {0});
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&record, t] {
        for (std::uint64_t i = 0; i < kCalls; ++i) {
          const auto ticket = record.begin(0, {"send", i, Dtype::u8, -1, 0, t}, 0);
          record.note_choice("direct", "network");
          record.end(ticket);
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  std::map<std::int64_t, std::vector<std::uint64_t>> counts;  // by tag: the thread
  for (const auto& call : of_phase(trace_events(dir / "trace-rank-0.json"), "X")) {
    counts[call.at("args").at("tag").get<std::int64_t>()].push_back(call.at("args").at("count"));
  }
  ASSERT_EQ(counts.size(), static_cast<std::size_t>(kThreads));
  for (const auto& [tag, seen] : counts) {
    ASSERT_EQ(seen.size(), kCalls) << "thread " << tag;
    for (std::uint64_t i = 0; i < kCalls; ++i) EXPECT_EQ(seen[i], i) << "thread " << tag;
  }
  std::filesystem::remove_all(dir);
}

// A link (or any file) left where a rank's trace goes is replaced, never
// written through.
TEST(CallRecord, ATraceNeverWritesThroughALinkLeftInItsPlace) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rlx-record-link-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto target = dir / "precious";
  std::ofstream(target) << "keep me\n";
  std::filesystem::create_symlink(target, dir / "trace-rank-0.json");
  {
    CallRecord record(8, "", dir.string());
    record.add_group("world", 0, {0});
    record.end(record.begin(0, {"barrier"}, 0));
  }
  std::ifstream kept(target);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "keep me\n");
  EXPECT_FALSE(std::filesystem::is_symlink(dir / "trace-rank-0.json"));
  EXPECT_EQ(of_phase(trace_events(dir / "trace-rank-0.json"), "X").size(), 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rlx
