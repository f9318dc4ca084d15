#include "rlx/launcher/job_record.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string_view>

#include <fcntl.h>
#include <unistd.h>

#include "rlx/launcher/record_analysis.h"
#include "rlx/launcher/trace_merge.h"
#include "rlx/transport/launch_env.h"

namespace rlx::launcher {
namespace {

std::uint64_t unix_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

constexpr std::string_view kOwnPrefix = "rlxrun-record.";

// What an rlxrun that was killed (SIGKILL: no destructor ran) left: its
// directory is named after its pid, so a directory whose rlxrun is gone goes.
void remove_orphaned_directories(const std::string& parent) {
  std::error_code error;
  std::filesystem::directory_iterator it(parent, error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(kOwnPrefix)) continue;
    const std::string pid =
        name.substr(kOwnPrefix.size(), name.find('.', kOwnPrefix.size()) - kOwnPrefix.size());
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      std::filesystem::remove_all(it->path(), ignored);
    }
  }
}

// `dir` as the ranks see it: relative to their working directory `cwd`.
std::string as_ranks_see_it(const std::string& dir, const std::string& cwd) {
  if (dir.empty()) return "";
  std::filesystem::path path = dir;
  std::error_code error;
  if (path.is_relative()) {
    path = (cwd.empty() ? std::filesystem::current_path(error) : std::filesystem::path(cwd)) / path;
  }
  return path.lexically_normal().string();
}

}  // namespace

JobRecord::JobRecord(const std::string& user_dir, const std::string& trace_dir,
                     const std::string& cwd)
    : trace_dir_(as_ranks_see_it(trace_dir, cwd)), started_unix_ns_(unix_ns()) {
  if (!user_dir.empty()) {
    dir_ = as_ranks_see_it(user_dir, cwd);
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string parent = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  remove_orphaned_directories(parent);
  std::string pattern =
      parent + "/" + std::string(kOwnPrefix) + std::to_string(::getpid()) + ".XXXXXX";
  if (::mkdtemp(pattern.data()) != nullptr) {
    dir_ = pattern;
    own_ = true;
  }
}

JobRecord::~JobRecord() {
  if (!own_) return;
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::optional<std::string> JobRecord::variable() const {
  if (!own_) return std::nullopt;
  return std::string(launch_env::kDumpDir) + "=" + dir_;
}

bool JobRecord::ask_for_dumps() {
  if (dir_.empty()) return false;
  asked_unix_ns_ = unix_ns();
  // Never through a link or into a FIFO someone left there.
  const std::string path = dir_ + "/" + std::string(launch_env::kDumpRequestFile);
  const int fd = ::open(path.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const std::string stamp = std::to_string(asked_unix_ns_) + "\n";
  const bool written =
      ::write(fd, stamp.data(), stamp.size()) == static_cast<ssize_t>(stamp.size());
  ::close(fd);
  return written;
}

std::vector<std::string> JobRecord::status(int world_size) const {
  if (dir_.empty()) return {"no flight record directory"};
  std::vector<std::string> problems;
  auto records = read_records(dir_, problems);
  std::erase_if(records, [this](const RankRecord& r) { return r.now_unix_ns < asked_unix_ns_; });
  std::vector<int> silent;
  for (int rank = 0; rank < world_size; ++rank) {
    if (std::none_of(records.begin(), records.end(),
                     [rank](const RankRecord& r) { return r.rank == rank; })) {
      silent.push_back(rank);
    }
  }
  const std::set<int> none;
  auto lines = find_culprits(records, world_size, &none);
  const auto progress = describe_progress(records);
  lines.insert(lines.end(), progress.begin(), progress.end());
  if (!silent.empty()) {
    std::string ranks;
    for (std::size_t i = 0; i < silent.size() && i < 16; ++i) {
      ranks += (i > 0 ? ", " : "") + std::to_string(silent[i]);
    }
    if (silent.size() > 16) ranks += ", ... (" + std::to_string(silent.size()) + " ranks)";
    lines.push_back((silent.size() == 1 ? "rank " : "ranks ") + ranks +
                    " did not answer (on another host, not started, or not in rlx yet)");
  }
  lines.insert(lines.end(), problems.begin(), problems.end());
  return lines;
}

std::vector<std::string> JobRecord::findings(int world_size,
                                             const std::set<int>& missing_matters) const {
  if (dir_.empty()) return {};
  std::vector<std::string> problems;
  auto records = read_records(dir_, problems);
  std::erase_if(records, [this](const RankRecord& r) { return r.now_unix_ns < started_unix_ns_; });
  auto lines = find_culprits(records, world_size, &missing_matters);
  lines.insert(lines.end(), problems.begin(), problems.end());
  return lines;
}

std::vector<std::string> JobRecord::merge_trace() const {
  if (trace_dir_.empty()) return {};
  const MergedTrace merged = merge_traces(trace_dir_, started_unix_ns_);
  std::vector<std::string> lines;
  if (!merged.path.empty()) {
    lines.push_back("trace of " + std::to_string(merged.calls) + " calls from " +
                    std::to_string(merged.ranks) + (merged.ranks == 1 ? " rank: " : " ranks: ") +
                    merged.path + " (open it in ui.perfetto.dev or chrome://tracing)");
  } else if (merged.problems.empty()) {
    lines.push_back("no rank wrote a trace into " + trace_dir_ + " (RLX_TRACE)");
  }
  lines.insert(lines.end(), merged.problems.begin(), merged.problems.end());
  return lines;
}

}  // namespace rlx::launcher
