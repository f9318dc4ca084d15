// Merges the Chrome traces a job's ranks wrote with RLX_TRACE=DIR (the
// flight recorder's trace-rank-R.json, rlx/transport/call_record.h) into one
// file, DIR/trace.json, that Perfetto and chrome://tracing open as the job:
// one process per rank, one track per group and thread. rlxrun does this
// once every local rank has ended.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlx::launcher {

struct MergedTrace {
  std::string path;                   // empty when there was nothing to merge
  std::size_t ranks = 0;              // rank files merged
  std::size_t calls = 0;              // call events among the merged events
  std::vector<std::string> problems;  // files and lines passed over, and why
};

// Merges every trace-rank-*.json in `dir` written at or after
// `since_unix_ns` (older ones are an earlier job's). A rank's file may end
// anywhere (a rank killed mid-write: Chrome's format allows the missing
// bracket); a line that is not one JSON object is passed over and counted.
MergedTrace merge_traces(const std::string& dir, std::uint64_t since_unix_ns);

}  // namespace rlx::launcher
