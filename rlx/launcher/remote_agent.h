// The remote half of rlxrun: `rlxrun --remote-agent`, started on a remote host
// over ssh for one rank. It reads an AgentRequest from stdin, starts the rank
// with the job's environment (the token arrives this way, never on a command
// line), passes stdin, stdout and stderr straight through, and exits with the
// rank's status. When the ssh session ends first (the launcher stopped the job,
// died, or lost the network), it stops the rank: SIGTERM, then SIGKILL.
#pragma once

namespace rlx::launcher {

// The flag that selects the agent; the launcher passes it and nothing else.
inline constexpr const char* kRemoteAgentFlag = "--remote-agent";

// Runs the agent to the end; returns its exit status (the rank's, 128+N for a
// rank killed by signal N, 127 when the rank could not be started).
int run_remote_agent();

}  // namespace rlx::launcher
