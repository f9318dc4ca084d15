#include "rlx/launcher/slurm_allocation.h"

#include <charconv>

#include "rlx/launcher/remote_agent.h"

namespace rlx::launcher {
namespace {

[[noreturn]] void fail(std::string_view origin, const std::string& what) {
  throw HostfileError(std::string(origin) + ": " + what);
}

std::optional<long> number(std::string_view text) {
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// Splits on commas outside brackets.
std::vector<std::string_view> top_level_items(std::string_view list, std::string_view origin) {
  std::vector<std::string_view> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) fail(origin, "unbalanced brackets in '" + std::string(list) + "'");
    if (c == ',' && depth == 0) {
      if (i == start) fail(origin, "an empty name in '" + std::string(list) + "'");
      items.push_back(list.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) fail(origin, "unbalanced brackets in '" + std::string(list) + "'");
  return items;
}

// "01-03,07" -> 01 02 03 07, each as wide as its range's first bound.
std::vector<std::string> expand_ranges(std::string_view ranges, std::string_view origin) {
  constexpr long kMaxHosts = 1 << 20;
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= ranges.size()) {
    const std::size_t comma = std::min(ranges.find(',', start), ranges.size());
    const std::string_view range = ranges.substr(start, comma - start);
    const std::size_t dash = range.find('-');
    const std::string_view first = range.substr(0, dash);
    const std::string_view last = dash == std::string_view::npos ? first : range.substr(dash + 1);
    const auto a = number(first), b = number(last);
    if (first.empty() || !a || !b || *b < *a || *b - *a > kMaxHosts) {
      fail(origin, "'" + std::string(range) + "' is not a range like 01-03 or 7");
    }
    for (long i = *a; i <= *b; ++i) {
      std::string digits = std::to_string(i);
      if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');
      out.push_back(std::move(digits));
    }
    start = comma + 1;
  }
  return out;
}

void expand_item(std::string_view item, std::string prefix, std::vector<std::string>& out,
                 std::string_view origin) {
  const std::size_t open = item.find('[');
  if (open == std::string_view::npos) {
    out.push_back(prefix + std::string(item));
    return;
  }
  const std::size_t close = item.find(']', open);
  const std::string head = prefix + std::string(item.substr(0, open));
  for (const std::string& value : expand_ranges(item.substr(open + 1, close - open - 1), origin)) {
    expand_item(item.substr(close + 1), head + value, out, origin);
  }
}

}  // namespace

std::vector<std::string> expand_host_list(std::string_view list, std::string_view origin) {
  std::vector<std::string> hosts;
  for (std::string_view item : top_level_items(list, origin)) expand_item(item, "", hosts, origin);
  return hosts;
}

std::vector<int> expand_tasks_per_node(std::string_view spec, std::string_view origin) {
  std::vector<int> counts;
  for (std::string_view item : top_level_items(spec, origin)) {
    const std::size_t paren = item.find("(x");
    const auto tasks = number(item.substr(0, paren));
    std::optional<long> repeat = 1;
    if (paren != std::string_view::npos) {
      if (!item.ends_with(")")) fail(origin, "'" + std::string(item) + "' is not N or N(xK)");
      repeat = number(item.substr(paren + 2, item.size() - paren - 3));
    }
    if (!tasks || *tasks < 1 || *tasks > (1 << 20) || !repeat || *repeat < 1 ||
        *repeat > (1 << 20)) {
      fail(origin, "'" + std::string(item) + "' is not N or N(xK) with N, K from 1");
    }
    counts.insert(counts.end(), static_cast<std::size_t>(*repeat), static_cast<int>(*tasks));
  }
  return counts;
}

std::optional<std::vector<HostSlots>> slurm_allocation(const Lookup& lookup) {
  const char* nodes = lookup("SLURM_JOB_NODELIST");
  if (nodes == nullptr) return std::nullopt;
  const auto hosts = expand_host_list(nodes, "SLURM_JOB_NODELIST");
  std::vector<int> slots(hosts.size(), 1);
  if (const char* tasks = lookup("SLURM_TASKS_PER_NODE")) {
    slots = expand_tasks_per_node(tasks, "SLURM_TASKS_PER_NODE");
    if (slots.size() != hosts.size()) {
      fail("SLURM_TASKS_PER_NODE",
           "'" + std::string(tasks) + "' gives " + std::to_string(slots.size()) +
               " hosts but SLURM_JOB_NODELIST lists " + std::to_string(hosts.size()));
    }
  }
  std::vector<HostSlots> allocation;
  for (std::size_t h = 0; h < hosts.size(); ++h) allocation.push_back({hosts[h], slots[h], {}, {}});
  return allocation;
}

std::vector<std::string> srun_agent_argv(const std::string& host, const std::string& rlxrun) {
  return {
      "srun",    "--nodes=1",  "--ntasks=1",         "--overlap", "--kill-on-bad-exit=1",
      "--quiet", "--mpi=none", "--nodelist=" + host, rlxrun,      std::string(kRemoteAgentFlag)};
}

}  // namespace rlx::launcher
