#include "rlx/launcher/remote_launch.h"

#include <gtest/gtest.h>

#include "rlx/launcher/options.h"

namespace rlx::launcher {
namespace {

using Words = std::vector<std::string>;

TEST(RemoteLaunch, SplitsAnRshCommandAsAShellWould) {
  EXPECT_EQ(split_command_words("ssh -p 2222", "--rsh"), (Words{"ssh", "-p", "2222"}));
  EXPECT_EQ(split_command_words("  ssh\t-i '/keys/my key' -o \"A=b c\" x\\ y ", "--rsh"),
            (Words{"ssh", "-i", "/keys/my key", "-o", "A=b c", "x y"}));
  EXPECT_EQ(split_command_words("ssh ''", "--rsh"), (Words{"ssh", ""}));
}

TEST(RemoteLaunch, RejectsUnterminatedQuotesAndEmptyCommands) {
  for (const char* bad : {"ssh -i 'key", "ssh \"x", "", "   "}) {
    try {
      split_command_words(bad, "--rsh");
      FAIL() << "accepted '" << bad << "'";
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find("--rsh"), std::string::npos) << error.what();
    }
  }
}

TEST(RemoteLaunch, QuotesForARemoteShell) {
  EXPECT_EQ(shell_quote("/opt/rlx/bin/rlxrun"), "'/opt/rlx/bin/rlxrun'");
  EXPECT_EQ(shell_quote("it's here"), "'it'\\''s here'");
}

TEST(RemoteLaunch, TheRemoteCommandCarriesNoSecretOnlyThePathAndTheAgentFlag) {
  const Words argv =
      remote_agent_argv({"ssh", "-o", "BatchMode=yes"}, "node7", "/opt/my rlx/rlxrun");
  EXPECT_EQ(argv, (Words{"ssh", "-o", "BatchMode=yes", "node7",
                         "exec '/opt/my rlx/rlxrun' --remote-agent"}));
}

TEST(RemoteLaunch, ParsesTheRshFlag) {
  const Options o = parse_options({"-n", "2", "--rsh", "ssh -p 2222", "./prog"});
  EXPECT_EQ(o.rsh, (Words{"ssh", "-p", "2222"}));
}

}  // namespace
}  // namespace rlx::launcher
