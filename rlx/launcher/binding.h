// Where rlxrun puts ranks, as mpirun spells it: which host each rank runs on
// (--map-by) and which CPUs of that host it may run on (--bind-to).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rlx::launcher {

// --map-by: slot fills each host's slots before the next host's (mpirun's
// default); node deals ranks round-robin over the hosts.
enum class MapBy { slot, node };

// --bind-to: a rank to one core (all of its hardware threads), to one
// hardware thread, to one package (socket), or to nothing. automatic does
// what mpirun does: a core each for up to 2 ranks on a host, a package each
// (ranks in blocks) for more where the host has several, and nothing where
// ranks outnumber cores. RLX_BIND_TO in rlxrun's environment sets the default.
enum class BindTo { automatic, none, core, hwthread, package };

std::string_view name_of(MapBy policy);
std::string_view name_of(BindTo policy);

// The CPUs this process may use (its affinity: taskset, cgroups and Slurm
// narrow it), grouped by core, in the order of their first CPU.
struct CpuTopology {
  std::vector<std::vector<int>> cores;
  std::vector<std::vector<int>> packages;
};
CpuTopology this_host_topology();

// What automatic means for `local_size` ranks on a host of `topology`.
BindTo automatic_policy(int local_size, const CpuTopology& topology);

// The CPUs rank `local_rank` of the `local_size` ranks of this host binds
// to; empty for none. Throws std::runtime_error when an explicit policy has
// fewer cores or hardware threads than ranks, or no topology, saying how to
// run anyway.
std::vector<int> cpus_for_rank(BindTo policy, int local_rank, int local_size,
                               const CpuTopology& topology);

// "0,1" for {0, 1}: as /proc/PID/status's Cpus_allowed_list prints them, less ranges.
std::string cpu_list(const std::vector<int>& cpus);

// Restricts the calling process (a child between fork and exec) to `cpus`;
// nothing for an empty list. Async-signal-safe; returns false on failure.
bool bind_to_cpus(const std::vector<int>& cpus);

}  // namespace rlx::launcher
