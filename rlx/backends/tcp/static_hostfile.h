// RLX_HOSTFILE: a static table of every rank's endpoint, so a job can start
// without any coordinator (as MLX's ring backend does, whose MLX_HOSTFILE is
// the same table). Rank i is entry i:
//
//   ["10.0.0.1:5000", "10.0.0.2:5000"]                  endpoints
//   [["10.0.0.1:5000"], ["10.0.0.2:5000", "..."]]       MLX: per-rank lists (first used)
//   [{"host": "node1", "port": 5000}, ...]              objects
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rlx/transport/endpoint.h"
#include "rlx/transport/launch_env.h"

namespace rlx::tcp {

// The variable env.hostfile came from: MLX_HOSTFILE under mlx.launch, else
// RLX_HOSTFILE. Errors name it, so a user of either finds what to fix.
std::string_view hostfile_variable(const launch_env::LaunchEnv& env);

// Reads env.hostfile through the shared bounded reader
// (rlx/transport/hostfile_reader.h; a pipe or device has RLX_CONNECT_TIMEOUT_S).
// Throws CollectiveError (invalid_argument) naming the variable, the file,
// the entry and what was expected, quoting at most an excerpt of it.
std::vector<HostPort> read_static_table(const launch_env::LaunchEnv& env);
std::vector<HostPort> parse_static_table(std::string_view json_text, const std::string& origin,
                                         std::string_view variable = launch_env::kHostfile);

}  // namespace rlx::tcp
