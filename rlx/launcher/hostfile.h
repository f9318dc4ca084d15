// Where ranks run: the host lists rlxrun reads, and the placement of ranks on them.
//
// Three formats, each as its users write it:
//   Open MPI     "node1 slots=4 max_slots=8"   one host per line, # comments, blank lines
//   Horovod      -H node1:2,node2:4            on the command line
//   MLX (JSON)   [{"ssh": "node1", "ips": ["10.0.0.1"]}, "node2", ...]   one slot per entry,
//                or mlx.launch's object form {"backend": "ring", "envs": ["K=V", ...],
//                "hosts": [...]}: "ips"[0] is the address the host's rank listens
//                on and is reached at; "envs" are set for every rank; "backend"
//                and "rdma" are MLX's choices (rlxrun's --backend decides here).
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/launcher/binding.h"

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
  std::string address;           // where its ranks listen (MLX "ips"); empty: chosen
  friend bool operator==(const HostSlots&, const HostSlots&) = default;
};

// A hostfile's hosts and the variables it sets for every rank ("NAME=value").
struct HostList {
  std::vector<HostSlots> hosts;
  std::vector<std::string> envs;
};

std::vector<HostSlots> parse_openmpi_hostfile(std::string_view text, std::string_view origin);
std::vector<HostSlots> parse_host_list(std::string_view spec);  // "-H a:2,b,c:4"
HostList parse_mlx_hostfile(std::string_view text, std::string_view origin);

// Reads a hostfile, JSON (MLX) when it starts with '[' or '{' and Open MPI
// text otherwise, through the library's bounded reader
// (rlx/transport/hostfile_reader.h: a pipe or device has `connect_timeout` to
// end). An object's "envs" may not set a rank's place in the group
// (launch_env::kPerRankVariables) and must parse as the ranks will parse them.
HostList read_hostfile(const std::string& path, std::chrono::milliseconds connect_timeout);

struct Placement {
  std::string host;
  int local_rank = 0;
  int local_size = 0;
  std::string address;            // the host's, when the hostfile names one
  std::vector<std::string> envs;  // the hostfile's "NAME=value" for every rank
  std::vector<int> cpus;          // a local rank's binding (binding.h); empty: none
  int binding_slot = 0;           // its place among its machine's ranks, which binding uses
  int binding_slots = 1;          // (plan_placement: -H a,a names one machine twice)
};

// Ranks fill each host's slots in order. More ranks than slots is an error
// unless `oversubscribe`, which then deals the extra ranks round-robin over
// hosts below their max_slots. Throws HostfileError saying how many fit.
// --map-by node deals the ranks round-robin over the hosts' slots instead.
std::vector<Placement> place_ranks(const std::vector<HostSlots>& hosts, int ranks,
                                   bool oversubscribe, MapBy map_by = MapBy::slot);

// True for names and addresses of this machine ("localhost", 127.x, ::1,
// its hostname, the addresses of its interfaces): those ranks are forked, not ssh'd.
bool is_local_host(const std::string& host);

}  // namespace rlx::launcher
