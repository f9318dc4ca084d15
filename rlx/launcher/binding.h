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
// hardware thread, or to nothing. automatic binds to cores where a host's
// ranks do not outnumber its cores, and to nothing where they do.
enum class BindTo { automatic, none, core, hwthread };

std::string_view name_of(MapBy policy);
std::string_view name_of(BindTo policy);

// The CPUs this process may use (its affinity: taskset, cgroups and Slurm
// narrow it), grouped by core, in the order of their first CPU.
struct CpuTopology {
  std::vector<std::vector<int>> cores;
};
CpuTopology this_host_topology();

// The CPUs rank `local_rank` of the `local_size` ranks of this host binds
// to; empty for none. Throws std::runtime_error when an explicit policy has
// fewer cores or hardware threads than ranks, saying how to run anyway.
std::vector<int> cpus_for_rank(BindTo policy, int local_rank, int local_size,
                               const CpuTopology& topology);

// "0,1" for {0, 1}: as /proc/PID/status's Cpus_allowed_list prints them, less ranges.
std::string cpu_list(const std::vector<int>& cpus);

// Restricts the calling process (a child between fork and exec) to `cpus`;
// nothing for an empty list. Async-signal-safe; returns false on failure.
bool bind_to_cpus(const std::vector<int>& cpus);

}  // namespace rlx::launcher
