#include "rlx/launcher/trace_merge.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include "rlx/launcher/options.h"  // kMaxRanks
#include "rlx/transport/hostfile_reader.h"
#include "rlx/transport/launch_env.h"  // excerpt()

namespace rlx::launcher {
namespace {

// An event is one line of a few hundred bytes (an error's text may make it
// longer): a longer line is not an event rlx wrote.
constexpr std::size_t kMaxLine = std::size_t{1} << 20;
// What one job's merged trace may hold (about 16 million calls); the rest of
// the rank files stays where it is.
constexpr std::uint64_t kMaxMergedBytes = std::uint64_t{4} << 30;

// Calls `line` with each line of the regular file `path` (at most kMaxLine
// long; a longer one is reported and skipped). Throws naming the file when
// it is not a regular file or cannot be read: a FIFO or a device left in
// the directory is never waited on.
// Reads the file as long as it was when opened (a rank still writing it
// does not keep the merge going), at most `budget` bytes, which it lowers.
// Files of other users are not this job's.
void for_each_line(const std::string& path, const std::function<void(std::string_view)>& line,
                   std::uint64_t& budget, std::vector<std::string>& problems) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != ::geteuid()) {
    ::close(fd);
    throw std::runtime_error(path + ": not a regular file of this user");
  }
  auto left = static_cast<std::uint64_t>(info.st_size);
  if (left > budget) {
    problems.push_back(path + ": merged only in part (a job's trace.json holds at most 4 GiB)");
    left = budget;
  }
  budget -= left;
  std::string pending;
  bool too_long = false;
  std::size_t long_lines = 0;
  char chunk[1 << 16];
  while (left > 0) {
    const auto n =
        ::read(fd, chunk, static_cast<std::size_t>(std::min<std::uint64_t>(left, sizeof chunk)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    left -= static_cast<std::uint64_t>(n);
    std::string_view data(chunk, static_cast<std::size_t>(n));
    for (auto newline = data.find('\n'); !data.empty(); newline = data.find('\n')) {
      const std::string_view part = data.substr(0, newline);
      if (!too_long) pending += part;
      if (pending.size() > kMaxLine) {
        pending.clear();
        too_long = true;
      }
      if (newline == std::string_view::npos) break;
      long_lines += too_long ? 1 : 0;
      if (!too_long) line(pending);
      pending.clear();
      too_long = false;
      data.remove_prefix(newline + 1);
    }
  }
  ::close(fd);
  long_lines += too_long ? 1 : 0;
  if (!too_long && !pending.empty()) line(pending);
  if (long_lines > 0) {
    problems.push_back(path + ": " + std::to_string(long_lines) +
                       " lines longer than 1 MiB, passed over");
  }
}

// The event a trace line holds: "[", "]" and blank lines hold none; an
// event line may end in the comma that separates it from the next. The line
// itself is kept (reformatting could round the timestamps) once it parsed
// as one object.
std::optional<std::string_view> event_of(std::string_view line, const std::string& origin,
                                         bool& is_call) {
  while (!line.empty() && (line.back() == ',' || line.back() == ' ' || line.back() == '\r')) {
    line.remove_suffix(1);
  }
  if (line.empty() || line == "[" || line == "]") return std::nullopt;
  const nlohmann::json event = hostfile::parse_json(line, origin);
  if (!event.is_object()) throw std::runtime_error("not a JSON object");
  is_call = event.value("ph", "") == "X";
  return line;
}

std::vector<std::filesystem::path> rank_traces(const std::string& dir, std::uint64_t since_unix_ns,
                                               std::vector<std::string>& problems) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(launch_env::kTraceFilePrefix) || !name.ends_with(".json")) continue;
    const std::string rank = name.substr(launch_env::kTraceFilePrefix.size(),
                                         name.size() - launch_env::kTraceFilePrefix.size() - 5);
    if (rank.empty() || rank.size() > 5 ||
        rank.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    struct stat info {};
    if (::lstat(it->path().c_str(), &info) != 0) continue;
    const auto written = static_cast<std::uint64_t>(info.st_mtim.tv_sec) * 1'000'000'000 +
                         static_cast<std::uint64_t>(info.st_mtim.tv_nsec);
    if (written < since_unix_ns) continue;
    if (files.size() == static_cast<std::size_t>(kMaxRanks)) {
      problems.push_back(dir + ": more than " + std::to_string(kMaxRanks) +
                         " rank traces; the rest are not merged");
      break;
    }
    files.push_back(it->path());
  }
  if (error) problems.push_back(dir + ": " + error.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

MergedTrace merge_traces(const std::string& dir, std::uint64_t since_unix_ns) {
  MergedTrace merged;
  const auto files = rank_traces(dir, since_unix_ns, merged.problems);
  if (files.empty()) return merged;
  const std::string path = dir + "/" + std::string(launch_env::kMergedTraceFile);
  const std::string partial = dir + "/." + std::string(launch_env::kMergedTraceFile) + "." +
                              std::to_string(::getpid()) + ".partial";
  ::unlink(partial.c_str());
  const int fd =
      ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  FILE* out = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (out == nullptr) {
    merged.problems.push_back(partial + ": " + std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return merged;
  }
  std::fputs("{\"traceEvents\":[", out);
  const char* separator = "\n";
  std::uint64_t budget = kMaxMergedBytes;
  for (const auto& file : files) {
    std::size_t skipped = 0;
    try {
      for_each_line(
          file.string(),
          [&](std::string_view line) {
            try {
              bool is_call = false;
              const auto event = event_of(line, file.string(), is_call);
              if (!event) return;
              std::fputs(separator, out);
              std::fwrite(event->data(), 1, event->size(), out);
              separator = ",\n";
              merged.calls += is_call ? 1 : 0;
            } catch (const std::exception&) {
              ++skipped;
            }
          },
          budget, merged.problems);
      ++merged.ranks;
    } catch (const std::exception& e) {
      merged.problems.push_back(excerpt(e.what(), 200));
    }
    if (skipped > 0) {
      merged.problems.push_back(file.string() + ": " + std::to_string(skipped) +
                                " lines that are not trace events, passed over (the last may be "
                                "one a killed rank was writing)");
    }
  }
  std::fputs("\n],\"displayTimeUnit\":\"ms\"}\n", out);
  const bool written = std::ferror(out) == 0;
  if (std::fclose(out) != 0 || !written || std::rename(partial.c_str(), path.c_str()) != 0) {
    merged.problems.push_back(path + ": could not be written: " + std::strerror(errno));
    ::unlink(partial.c_str());
    return merged;
  }
  merged.path = path;
  return merged;
}

}  // namespace rlx::launcher
