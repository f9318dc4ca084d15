#include "rlx/launcher/remote_launch.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <stdexcept>

#include <unistd.h>

#include "rlx/launcher/options.h"
#include "rlx/launcher/remote_agent.h"

namespace rlx::launcher {

std::vector<std::string> split_command_words(std::string_view text, std::string_view flag) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == quote) {
        quote = 0;
      } else if (c == '\\' && quote == '"' && i + 1 < text.size()) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      in_word = true;
    } else if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::exchange(word, {}));
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (quote != 0) {
    throw UsageError(std::string(flag) + " '" + std::string(text) + "': unterminated " +
                     (quote == '\'' ? "'" : "\"") + " quote");
  }
  if (in_word) words.push_back(word);
  if (words.empty())
    throw UsageError(std::string(flag) + ": expected a command, such as 'ssh -p 2222'");
  return words;
}

std::string shell_quote(std::string_view text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string this_executable() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n < 0)
    throw std::runtime_error(std::string("cannot find rlxrun's own path: ") + strerror(errno));
  return std::string(path, static_cast<std::size_t>(n));
}

std::vector<std::string> remote_agent_argv(const std::vector<std::string>& rsh,
                                           const std::string& host, const std::string& rlxrun) {
  std::vector<std::string> argv = rsh;
  argv.push_back(host);
  argv.push_back("exec " + shell_quote(rlxrun) + " " + kRemoteAgentFlag);
  return argv;
}

}  // namespace rlx::launcher
