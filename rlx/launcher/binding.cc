#include "rlx/launcher/binding.h"

#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include <sched.h>

namespace rlx::launcher {
namespace {

// A CPU's core as the kernel numbers it: (package, core); -1s when unknown.
std::pair<int, int> core_of(int cpu) {
  const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  auto read = [&](const char* name) {
    std::ifstream file(topology + name);
    int value = -1;
    return file >> value ? value : -1;
  };
  const int package = read("physical_package_id");
  const int core = read("core_id");
  if (package < 0 || core < 0) return {-1, cpu};  // unknown: each CPU its own core
  return {package, core};
}

}  // namespace

std::string_view name_of(MapBy policy) { return policy == MapBy::node ? "node" : "slot"; }

std::string_view name_of(BindTo policy) {
  switch (policy) {
    case BindTo::automatic:
      return "auto";
    case BindTo::none:
      return "none";
    case BindTo::core:
      return "core";
    case BindTo::hwthread:
      return "hwthread";
  }
  return "?";
}

CpuTopology this_host_topology() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
  CpuTopology topology;
  std::map<std::pair<int, int>, std::size_t> index_of_core;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    const auto [it, added] = index_of_core.try_emplace(core_of(cpu), topology.cores.size());
    if (added) topology.cores.emplace_back();
    topology.cores[it->second].push_back(cpu);
  }
  return topology;
}

std::vector<int> cpus_for_rank(BindTo policy, int local_rank, int local_size,
                               const CpuTopology& topology) {
  std::vector<std::vector<int>> units;  // what one rank gets
  if (policy == BindTo::hwthread) {
    for (const auto& core : topology.cores) {
      for (int cpu : core) units.push_back({cpu});
    }
  } else {
    units = topology.cores;
  }
  if (policy == BindTo::none || units.empty()) return {};
  if (local_size > static_cast<int>(units.size())) {
    if (policy == BindTo::automatic) return {};
    throw std::runtime_error("--bind-to " + std::string(name_of(policy)) + ": " +
                             std::to_string(local_size) + " ranks on this host but " +
                             std::to_string(units.size()) + " " +
                             (policy == BindTo::core ? "cores" : "hardware threads") +
                             " to bind them to (give --bind-to none, or fewer ranks)");
  }
  return units[static_cast<std::size_t>(local_rank)];
}

std::string cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (int cpu : cpus) out += (out.empty() ? "" : ",") + std::to_string(cpu);
  return out;
}

bool bind_to_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return true;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace rlx::launcher
