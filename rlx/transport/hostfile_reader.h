// The one reader of hostfiles, shared by rlxrun (--hostfile) and the library
// (RLX_HOSTFILE, MLX_HOSTFILE): anyone may point either at any path, so every
// way a file could stretch a reader is bounded. A regular file, a pipe
// (`--hostfile <(...)`) or a device is read to its end, at most kMaxBytes,
// and only for the connection phase's time (RLX_CONNECT_TIMEOUT_S): /dev/zero,
// a FIFO nobody writes or a device that never ends is an error, not a hang
// or an endless allocation. JSON is parsed only when it nests at most
// kMaxDepth deep, since nlohmann's dump() and copies recurse once per level
// (100,000 brackets overflowed the stack). Error messages quote excerpts,
// never a whole document.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace rlx::hostfile {

// Far above any real host list (100,000 ranks of "host:port" fit), far below
// what would strain memory.
inline constexpr std::size_t kMaxBytes = std::size_t{4} << 20;
// Real hostfiles nest 3 deep ({"hosts": [{"ips": [...]}]}).
inline constexpr int kMaxDepth = 32;

// What is wrong with a hostfile; what() starts with the file's name.
class ReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The whole text of the file at `path`. Throws ReadError, naming the path,
// when it cannot be opened or read, is a directory, holds a control byte
// (named with its offset: a binary file's bytes are never echoed), is longer
// than kMaxBytes, or has not ended within `connect_timeout`. `kind` names
// the file in those errors: other files a user points rlx at (the cost-model
// file) are read the same way.
std::string read_text(const std::string& path, std::chrono::milliseconds connect_timeout,
                      std::string_view kind = "hostfile");

// Parses `text` as JSON. Throws ReadError naming `origin` when it is not
// JSON (with the parser's position) or nests deeper than kMaxDepth.
nlohmann::json parse_json(std::string_view text, std::string_view origin);

// What an error message quotes of a parsed value: excerpt() (errors.h) of
// its compact JSON form.
std::string excerpt(const nlohmann::json& value, std::size_t limit = 80);

}  // namespace rlx::hostfile
