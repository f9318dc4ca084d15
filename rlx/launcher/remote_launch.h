// Starting ranks on other hosts: the ssh (--rsh) command line that starts
// `rlxrun --remote-agent` there. rlxrun must be installed at the same path on
// every host, as Open MPI expects of its orted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rlx::launcher {

// The default remote shell. BatchMode: a host that wants a password or an
// unknown host key fails at once instead of waiting for an answer nobody gives.
inline constexpr std::string_view kDefaultRsh = "ssh -o BatchMode=yes";

// Splits a command as a shell would for plain words: whitespace separates,
// 'single' and "double" quotes group, a backslash escapes one character.
// Throws UsageError (naming `flag`) for an unterminated quote or an empty command.
std::vector<std::string> split_command_words(std::string_view text, std::string_view flag);

// `text` quoted for a POSIX shell: 'it'\''s'.
std::string shell_quote(std::string_view text);

// The absolute path of the running rlxrun.
std::string this_executable();

// rsh words + host + the remote command that starts the agent.
std::vector<std::string> remote_agent_argv(const std::vector<std::string>& rsh,
                                           const std::string& host, const std::string& rlxrun);

}  // namespace rlx::launcher
