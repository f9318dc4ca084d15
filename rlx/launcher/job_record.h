// Where a job's ranks dump their flight record (rlx/transport/call_record.h),
// how rlxrun asks the running ones for it, and what it makes of the dumps
// once the job failed.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rlx::launcher {

class JobRecord {
 public:
  // The ranks' RLX_DUMP_DIR as rlxrun passes it on (`user_dir`, relative to
  // the ranks' working directory `cwd`), or a fresh directory of rlxrun's
  // own when that is empty; and their RLX_TRACE (`trace_dir`, empty: none).
  JobRecord(const std::string& user_dir, const std::string& trace_dir, const std::string& cwd);
  // Removes the directory when it is rlxrun's own.
  ~JobRecord();
  JobRecord(const JobRecord&) = delete;
  JobRecord& operator=(const JobRecord&) = delete;

  // What a local rank's environment gets (empty: the user's setting
  // reaches every rank already, remote ones included).
  std::optional<std::string> variable() const;
  // Asks every local rank that dumps into the directory for its record, by
  // touching its request file (no signal: rlxrun cannot vouch for what a
  // process does with one). False when there is no directory.
  bool ask_for_dumps();
  // The lines that name the culprit, from the dumps this job wrote (older
  // ones in a user's directory are passed over), and those of files that
  // were not dumps rlx can read. A rank without a dump is named only when
  // it is in `missing_matters`.
  std::vector<std::string> findings(int world_size, const std::set<int>& missing_matters) const;
  // What each rank was doing when it answered the last ask_for_dumps(), and
  // what holds the job up, if anything: the view of a running job.
  std::vector<std::string> status(int world_size) const;
  // With RLX_TRACE, merges the traces this job's ranks wrote into one file
  // (trace_merge.h) and says where it is, and what was passed over.
  std::vector<std::string> merge_trace() const;

 private:
  std::string dir_;
  std::string trace_dir_;
  bool own_ = false;
  std::uint64_t started_unix_ns_ = 0;
  std::uint64_t asked_unix_ns_ = 0;  // the last ask_for_dumps()
};

}  // namespace rlx::launcher
