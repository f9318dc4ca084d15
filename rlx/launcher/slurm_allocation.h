// rlxrun inside a Slurm allocation (salloc, sbatch): its hosts and slots come
// from the allocation, and its remote ranks start through srun.
//
//   SLURM_JOB_NODELIST    node[01-03,07],gpu5          compressed host list
//   SLURM_TASKS_PER_NODE  2(x3),1                      slots per host, in order
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/launcher/hostfile.h"

namespace rlx::launcher {

// Expands a Slurm host list: comma-separated names, each with any number of
// [a-b,c,...] groups (zero padding kept: node[08-10] is node08 node09
// node10). Throws HostfileError naming `origin` and what is wrong.
std::vector<std::string> expand_host_list(std::string_view list, std::string_view origin);

// Expands SLURM_TASKS_PER_NODE's "N(xK),M" form into one count per host.
std::vector<int> expand_tasks_per_node(std::string_view spec, std::string_view origin);

using Lookup = std::function<const char*(const char* name)>;

// The hosts and slots of the allocation this process runs in, or nullopt
// outside one (SLURM_JOB_NODELIST unset). Without SLURM_TASKS_PER_NODE
// every host gets one slot. Throws HostfileError on malformed values, or
// when the two lists disagree in length.
std::optional<std::vector<HostSlots>> slurm_allocation(const Lookup& lookup);

// How rlxrun starts its agent on `host` inside the allocation: one task of
// a new job step there, sharing the allocation's resources.
std::vector<std::string> srun_agent_argv(const std::string& host, const std::string& rlxrun);

}  // namespace rlx::launcher
