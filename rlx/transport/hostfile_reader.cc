#include "rlx/transport/hostfile_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rlx/transport/errors.h"

namespace rlx::hostfile {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(std::string_view origin, const std::string& what) {
  throw ReadError(std::string(origin) + ": " + what);
}

class OpenFile {
 public:
  explicit OpenFile(const std::string& path)
      // O_NONBLOCK: opening a FIFO waits for a writer otherwise, without any deadline.
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) {}
  ~OpenFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool is_text_byte(unsigned char byte) {
  return (byte >= 0x20 && byte != 0x7f) || byte == '\t' || byte == '\n' || byte == '\r';
}

// Quoting a binary file's "lines" back would print raw bytes to a terminal.
void expect_text(std::string_view chunk, std::size_t offset, const std::string& path,
                 std::string_view kind) {
  for (std::size_t i = 0; i < chunk.size(); ++i) {
    const auto byte = static_cast<unsigned char>(chunk[i]);
    if (is_text_byte(byte)) continue;
    char where[64];
    std::snprintf(where, sizeof where, "byte 0x%02x at offset %zu", byte, offset + i);
    fail(path,
         std::string("is not a text file (") + where + "); a " + std::string(kind) + " is text");
  }
}

std::string seconds_text(std::chrono::milliseconds time) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(time.count()) / 1000.0);
  return text;
}

// Waits until `fd` has bytes or an end to read; false once the deadline has
// passed, even for a file that is always ready (a trickling writer). A FIFO
// without a writer yet reports neither (only a writer's arrival or departure
// wakes it), so one nobody writes meets the deadline instead of looking empty.
bool wait_readable(int fd, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd ready{fd, POLLIN, 0};
    const int n = ::poll(&ready, 1, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // the read that follows reports it
  }
}

// Where `text` first opens a list or an object deeper than kMaxDepth, if it
// does. Brackets inside strings do not nest.
std::optional<std::size_t> too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxDepth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string read_text(const std::string& path, std::chrono::milliseconds connect_timeout,
                      std::string_view kind) {
  const auto deadline = Clock::now() + connect_timeout;
  const OpenFile file(path);
  if (file.get() < 0) fail(path, std::string("cannot be read (") + std::strerror(errno) + ")");
  struct stat status {};
  if (::fstat(file.get(), &status) == 0 && S_ISDIR(status.st_mode)) {
    fail(path, "is a directory, not a " + std::string(kind));
  }
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    if (!wait_readable(file.get(), deadline)) {
      fail(path, (text.empty() ? "nothing to read"
                               : "still not ended after " + format_bytes(text.size())) +
                     " within RLX_CONNECT_TIMEOUT_S (" + seconds_text(connect_timeout) +
                     "): a FIFO or device that nobody writes, or one that never ends");
    }
    const std::size_t room = kMaxBytes + 1 - text.size();  // one byte more shows it is too long
    const ssize_t got = ::read(file.get(), chunk, std::min(sizeof chunk, room));
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (got < 0) fail(path, std::string("cannot be read (") + std::strerror(errno) + ")");
    if (got == 0) return text;
    const std::string_view piece(chunk, static_cast<std::size_t>(got));
    expect_text(piece, text.size(), path, kind);
    text.append(piece);
    if (text.size() > kMaxBytes) {
      fail(path, "is longer than " + format_bytes(kMaxBytes) + ", the most a " + std::string(kind) +
                     " may hold");
    }
  }
}

nlohmann::json parse_json(std::string_view text, std::string_view origin) {
  if (const auto at = too_deep_at(text)) {
    fail(origin, "nests lists or objects more than " + std::to_string(kMaxDepth) +
                     " deep (at byte " + std::to_string(*at) + "); a hostfile needs 3");
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {  // parse_error, or out_of_range for 1e400
    std::string_view why = error.what();
    if (const auto end = why.find("] "); why.starts_with("[json.exception") && end != why.npos) {
      why.remove_prefix(end + 2);
    }
    fail(origin, "is not valid JSON: " + rlx::excerpt(why, 160));
  }
}

std::string excerpt(const nlohmann::json& value, std::size_t limit) {
  // Depth is bounded by parse_json; strings the parser accepted are UTF-8.
  return rlx::excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), limit);
}

}  // namespace rlx::hostfile
