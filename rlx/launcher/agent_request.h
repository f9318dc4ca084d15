// What rlxrun tells its agent on a remote host (rlxrun --remote-agent, started
// over ssh): the rank's environment, working directory and command line. It
// travels on ssh's stdin, never on a command line, because it holds the job
// token and `ps` shows command lines to every user of the host.
//
// Wire format: "RLXAGENT2\n", then NUL-terminated fields: the number of
// environment entries, each "NAME=VALUE", the working directory (empty: the
// login directory), the number of arguments, each argument, then the binding:
// the BindTo as a number, the local rank and the local size. Whatever follows
// is the rank's own stdin.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "rlx/launcher/binding.h"

namespace rlx::launcher {

struct AgentRequest {
  std::vector<std::string> environment;  // "NAME=VALUE", added to the login environment
  std::string cwd;
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  BindTo bind_to = BindTo::none;  // the agent binds the rank by its own host's cores
  int local_rank = 0;
  int local_size = 1;
  friend bool operator==(const AgentRequest&, const AgentRequest&) = default;
};

// A request that cannot be read; what() says which part and why.
class AgentRequestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string encode_agent_request(const AgentRequest& request);

// Reads one request from `fd` byte by byte, so nothing after it (the rank's
// stdin) is consumed. Bounded: at most 4096 entries and 1 MiB in all.
// Throws AgentRequestError.
AgentRequest read_agent_request(int fd);

// Decodes a request held in memory (the same rules; trailing bytes are an error).
AgentRequest decode_agent_request(std::string_view bytes);

}  // namespace rlx::launcher
