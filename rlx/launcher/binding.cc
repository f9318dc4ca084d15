#include "rlx/launcher/binding.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include <sched.h>

namespace rlx::launcher {
namespace {

std::string read_word(const std::string& path) {
  std::ifstream file(path);
  std::string word;
  file >> word;
  return word;
}

// A CPU's core and package as the kernel groups them: the core by its list
// of hardware-thread siblings (core ids repeat across dies on some
// machines), the package by its id. Empty when the kernel does not say.
std::pair<std::string, std::string> core_and_package_of(int cpu) {
  const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
  std::string core = read_word(topology + "core_cpus_list");
  if (core.empty()) core = read_word(topology + "thread_siblings_list");
  return {core, read_word(topology + "physical_package_id")};
}

// The CPUs this process may use, however many the machine has.
std::vector<int> allowed_cpus() {
  for (int capacity = 1024; capacity <= (1 << 16); capacity *= 4) {
    cpu_set_t* set = CPU_ALLOC(capacity);
    const std::size_t bytes = CPU_ALLOC_SIZE(capacity);
    std::vector<int> cpus;
    if (::sched_getaffinity(0, bytes, set) == 0) {
      for (int cpu = 0; cpu < capacity; ++cpu) {
        if (CPU_ISSET_S(cpu, bytes, set)) cpus.push_back(cpu);
      }
      CPU_FREE(set);
      return cpus;
    }
    CPU_FREE(set);
  }
  return {};
}

// What each rank gets under `policy`, in the order ranks take them.
std::vector<std::vector<int>> units_of(BindTo policy, const CpuTopology& topology) {
  std::vector<std::vector<int>> units;
  if (policy == BindTo::hwthread) {
    // The first thread of every core before any core's second, so ranks
    // fill cores before they share one.
    for (std::size_t thread = 0;; ++thread) {
      const std::size_t before = units.size();
      for (const auto& core : topology.cores) {
        if (thread < core.size()) units.push_back({core[thread]});
      }
      if (units.size() == before) break;
    }
  } else if (policy == BindTo::package) {
    units = topology.packages;
  } else {
    units = topology.cores;
  }
  return units;
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
    case BindTo::package:
      return "package";
  }
  return "?";
}

CpuTopology this_host_topology() {
  CpuTopology topology;
  std::map<std::string, std::size_t> index_of_core, index_of_package;
  for (int cpu : allowed_cpus()) {
    auto [core, package] = core_and_package_of(cpu);
    if (core.empty()) core = "cpu" + std::to_string(cpu);  // unknown: each CPU its own core
    const auto [c, new_core] = index_of_core.try_emplace(core, topology.cores.size());
    if (new_core) topology.cores.emplace_back();
    topology.cores[c->second].push_back(cpu);
    const auto [p, new_package] = index_of_package.try_emplace(package, topology.packages.size());
    if (new_package) topology.packages.emplace_back();
    topology.packages[p->second].push_back(cpu);
  }
  return topology;
}

BindTo automatic_policy(int local_size, const CpuTopology& topology) {
  const auto cores = static_cast<int>(topology.cores.size());
  const auto packages = static_cast<int>(topology.packages.size());
  if (local_size <= 2 && local_size <= cores) return BindTo::core;
  if (packages > 1 && local_size <= cores) return BindTo::package;
  return BindTo::none;
}

std::vector<int> cpus_for_rank(BindTo policy, int local_rank, int local_size,
                               const CpuTopology& topology) {
  if (policy == BindTo::automatic) policy = automatic_policy(local_size, topology);
  if (policy == BindTo::none) return {};
  const auto units = units_of(policy, topology);
  if (units.empty()) {
    throw std::runtime_error("--bind-to " + std::string(name_of(policy)) +
                             ": the kernel does not say which CPUs this process may use "
                             "(give --bind-to none)");
  }
  if (policy == BindTo::package) {  // ranks in blocks, one block per package
    const auto package =
        static_cast<std::size_t>(local_rank) * units.size() / static_cast<std::size_t>(local_size);
    return units[package];
  }
  if (local_size > static_cast<int>(units.size())) {
    throw std::runtime_error("--bind-to " + std::string(name_of(policy)) + ": " +
                             std::to_string(local_size) + " ranks on this host but " +
                             std::to_string(units.size()) + " " +
                             (policy == BindTo::core ? "cores" : "hardware threads") +
                             " to bind them to (give --bind-to none, or fewer ranks)");
  }
  const auto& cpus = units[static_cast<std::size_t>(local_rank)];
  // The child binds with a fixed-size set: CPUs beyond it stay unbound.
  return std::all_of(cpus.begin(), cpus.end(), [](int cpu) { return cpu < CPU_SETSIZE; })
             ? cpus
             : std::vector<int>{};
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
