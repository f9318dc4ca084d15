// RLX_HOSTFILE: a static table of every rank's endpoint, so a job can start
// without any coordinator (as MLX's ring backend does). Rank i is entry i:
//
//   ["10.0.0.1:5000", "10.0.0.2:5000"]                  endpoints
//   [["10.0.0.1:5000"], ["10.0.0.2:5000", "..."]]       MLX: per-rank lists (first used)
//   [{"host": "node1", "port": 5000}, ...]              objects
#pragma once

#include <string>
#include <vector>

#include "transport/endpoint.h"

namespace rlx::tcp {

// Throws CollectiveError (invalid_argument) naming the file, the entry and
// what was expected.
std::vector<HostPort> read_static_table(const std::string& path);
std::vector<HostPort> parse_static_table(const std::string& json_text, const std::string& origin);

}  // namespace rlx::tcp
