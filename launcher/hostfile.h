// Where ranks run: the host lists rlxrun reads, and the placement of ranks on them.
//
// Three formats, each as its users write it:
//   Open MPI     "node1 slots=4 max_slots=8"   one host per line, # comments, blank lines
//   Horovod      -H node1:2,node2:4            on the command line
//   MLX (JSON)   [{"ssh": "node1", "ips": ["10.0.0.1"]}, "node2", ...]   one slot per entry
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::launcher {

// A malformed host list; what() names the file, the line and what was expected.
class HostfileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HostSlots {
  std::string host;
  int slots = 1;
  std::optional<int> max_slots;  // a hard limit, even with --oversubscribe
  friend bool operator==(const HostSlots&, const HostSlots&) = default;
};

std::vector<HostSlots> parse_openmpi_hostfile(std::string_view text, std::string_view origin);
std::vector<HostSlots> parse_host_list(std::string_view spec);  // "-H a:2,b,c:4"
std::vector<HostSlots> parse_mlx_hostfile(std::string_view text, std::string_view origin);

// Reads a hostfile, JSON (MLX) when it starts with '[' and Open MPI text otherwise.
std::vector<HostSlots> read_hostfile(const std::string& path);

struct Placement {
  std::string host;
  int local_rank = 0;
  int local_size = 0;
};

// Ranks fill each host's slots in order. More ranks than slots is an error
// unless `oversubscribe`, which then deals the extra ranks round-robin over
// hosts below their max_slots. Throws HostfileError saying how many fit.
std::vector<Placement> place_ranks(const std::vector<HostSlots>& hosts, int ranks,
                                   bool oversubscribe);

// True for names and addresses of this machine ("localhost", 127.x, ::1,
// its hostname, the addresses of its interfaces): those ranks are forked, not ssh'd.
bool is_local_host(const std::string& host);

}  // namespace rlx::launcher
