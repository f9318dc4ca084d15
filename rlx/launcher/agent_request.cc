#include "rlx/launcher/agent_request.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <optional>

#include <unistd.h>

namespace rlx::launcher {
namespace {

constexpr std::string_view kMagic = "RLXAGENT2\n";
constexpr std::size_t kMaxBytes = std::size_t{1} << 20;
constexpr std::size_t kMaxEntries = 4096;

// A byte source: returns the next byte, or nullopt at end of input.
using NextByte = std::function<std::optional<char>()>;

class Reader {
 public:
  explicit Reader(NextByte next) : next_(std::move(next)) {}

  void expect_magic() {
    for (char want : kMagic) {
      const auto got = take("the header");
      if (got != want)
        fail("does not start with RLXAGENT2 (is rlxrun the same version on both hosts?)");
    }
  }

  std::string field(const char* what) {
    std::string out;
    for (char c; (c = take(what)) != '\0';) out += c;
    return out;
  }

  std::size_t count(const char* what) {
    const std::string text = field(what);
    std::size_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool leading_zero = text.size() > 1 && text[0] == '0';
    if (text.empty() || leading_zero || ec != std::errc() || end != text.data() + text.size() ||
        value > kMaxEntries) {
      fail(std::string(what) + " '" + text.substr(0, 32) + "' is not a count from 0 to 4096");
    }
    return value;
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw AgentRequestError("rlxrun agent: the launcher's request " + why);
  }

 private:
  char take(const char* what) {
    if (++consumed_ > kMaxBytes) fail("is larger than 1 MiB");
    const auto byte = next_();
    if (!byte) fail(std::string("ended inside ") + what);
    return *byte;
  }

  NextByte next_;
  std::size_t consumed_ = 0;
};

AgentRequest read_with(Reader& reader) {
  AgentRequest request;
  reader.expect_magic();
  const std::size_t env_count = reader.count("the environment count");
  for (std::size_t i = 0; i < env_count; ++i) {
    std::string entry = reader.field("an environment entry");
    const auto eq = entry.find('=');
    if (eq == 0 || eq == std::string::npos) {
      reader.fail("has an environment entry without NAME=: '" + entry.substr(0, 32) + "'");
    }
    request.environment.push_back(std::move(entry));
  }
  request.cwd = reader.field("the working directory");
  const std::size_t argc = reader.count("the argument count");
  if (argc == 0) reader.fail("has no program to run");
  for (std::size_t i = 0; i < argc; ++i) request.argv.push_back(reader.field("an argument"));
  const std::size_t bind_to = reader.count("the binding");
  if (bind_to > static_cast<std::size_t>(BindTo::package)) reader.fail("names no binding");
  request.bind_to = static_cast<BindTo>(bind_to);
  request.local_rank = static_cast<int>(reader.count("the local rank"));
  request.local_size = static_cast<int>(reader.count("the local size"));
  if (request.local_rank >= request.local_size) {
    reader.fail("puts local rank " + std::to_string(request.local_rank) + " among " +
                std::to_string(request.local_size));
  }
  return request;
}

}  // namespace

std::string encode_agent_request(const AgentRequest& request) {
  std::string out(kMagic);
  auto field = [&out](std::string_view text) {
    out += text;
    out += '\0';
  };
  field(std::to_string(request.environment.size()));
  for (const auto& entry : request.environment) field(entry);
  field(request.cwd);
  field(std::to_string(request.argv.size()));
  for (const auto& arg : request.argv) field(arg);
  field(std::to_string(static_cast<int>(request.bind_to)));
  field(std::to_string(request.local_rank));
  field(std::to_string(request.local_size));
  return out;
}

AgentRequest read_agent_request(int fd) {
  Reader reader([fd]() -> std::optional<char> {
    char byte;
    for (;;) {
      const ssize_t n = ::read(fd, &byte, 1);
      if (n == 1) return byte;
      if (n < 0 && errno == EINTR) continue;
      return std::nullopt;
    }
  });
  return read_with(reader);
}

AgentRequest decode_agent_request(std::string_view bytes) {
  std::size_t at = 0;
  Reader reader([&]() -> std::optional<char> {
    if (at >= bytes.size()) return std::nullopt;
    return bytes[at++];
  });
  AgentRequest request = read_with(reader);
  if (at != bytes.size())
    reader.fail("has " + std::to_string(bytes.size() - at) + " bytes after it");
  return request;
}

}  // namespace rlx::launcher
