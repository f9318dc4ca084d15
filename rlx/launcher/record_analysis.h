// Reads the flight recorder's dumps (rlx/transport/call_record.h: one
// rank-R.json per rank) and names the culprit of a failed or stuck job: the
// rank that never entered the collective the others wait in, the ranks that
// called different collectives, the rank that left no record. rlxrun prints
// this after a failed job; rlx-analyze prints it for any directory of dumps.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rlx::launcher {

// One call of a dump, as recorded.
struct RecordedEntry {
  std::uint64_t group = 0;
  std::string call;  // all_reduce, ..., send, recv
  std::uint64_t sequence = 0;
  std::uint64_t count = 0;
  std::string dtype;
  std::string op;  // empty when the call does not reduce
  int peer = -1;   // the root of a rooted collective, or the peer of a send or receive
  std::int64_t tag = -1;
  std::string state;           // running, done, failed; posted (isend, irecv)
  std::string error;           // for failed calls
  std::uint64_t start_ns = 0;  // the dump's clock (coarse: a few ms)

  bool is_collective() const {
    return call != "send" && call != "recv" && call != "isend" && call != "irecv";
  }
  // "all_reduce sum of 1000 x f32", "broadcast of 4 x i32 from rank 0",
  // "recv from rank 1 (tag 3)".
  std::string shape() const;
};

struct RecordedGroup {
  std::uint64_t id = 0;
  std::string label;
  int rank = -1;
  std::vector<int> world_ranks;
};

// One rank's dump.
struct RankRecord {
  int rank = -1;
  int world_size = 0;
  std::string host;
  long long pid = 0;
  std::string reason;
  std::uint64_t now_ns = 0;             // when the dump was written, on its calls' clock
  std::uint64_t now_unix_ns = 0;        // the same, as wall-clock time
  std::uint64_t overwritten_calls = 0;  // older calls the ring no longer holds
  std::vector<RecordedGroup> groups;
  std::vector<RecordedEntry> calls;  // oldest first
};

// Reads every rank-*.json of `dir`. A file that is not a dump (or not a
// readable one) is skipped and named in `problems`.
std::vector<RankRecord> read_records(const std::string& dir, std::vector<std::string>& problems);

// The findings, most telling first, one line each: who is behind, who
// disagrees, who left no record, what failed. `world_size` is the job's
// (0: as the dumps say, at most kMaxRanks). A rank without a dump is named
// only when it is in `missing_matters` (null: every rank). Empty when every
// rank finished its last call, or when there is no dump at all.
std::vector<std::string> find_culprits(const std::vector<RankRecord>& records, int world_size,
                                       const std::set<int>* missing_matters = nullptr);

// What each rank is doing as its dump says, one line per distinct answer
// ("ranks 0, 1, 3: in all_reduce sum of 4 x f32 #12 of group world"): the
// view of a running job (rlxrun on SIGUSR1).
std::vector<std::string> describe_progress(const std::vector<RankRecord>& records);

}  // namespace rlx::launcher
