#include "collectives/hierarchical.h"

#include <algorithm>

#include "collectives/algorithms.h"
#include "collectives/cost_model.h"
#include "transport/log.h"

namespace rlx {
namespace {

bool every_host_has(const SameHost& host, std::size_t ranks) {
  return std::all_of(host.groups().begin(), host.groups().end(),
                     [&](const auto& group) { return group.size() == ranks; });
}

void all_reduce_by_rails(Links& links, SameHost& host, const CollectiveCall& call, ElementSpan data,
                         const Tuning& tuning) {
  ShmCollectives& local = host.collectives();
  local.reduce_scatter_blocks(call, data);
  const BlockSplit split{data.count, local.local_size()};
  const int index = local.local_rank();
  Links& rail = host.across_hosts(links, static_cast<std::size_t>(index));
  CollectiveCall rail_call = call;
  rail_call.count = split.length(index);
  auto* block = static_cast<std::byte*>(data.data) + split.begin(index) * size_of(data.dtype);
  all_reduce(rail, rail_call, {block, rail_call.count, data.dtype}, tuning);
  local.all_gather_blocks(call, data);
}

void all_reduce_by_leaders(Links& links, SameHost& host, const CollectiveCall& call,
                           ElementSpan data, const Tuning& tuning) {
  const std::vector<int>& group = host.group_of(links.rank());
  if (group.size() > 1) host.collectives().all_reduce(call, data);
  if (group.front() == links.rank()) {
    all_reduce(host.across_hosts(links, 0), call, data, tuning);
  }
  if (group.size() > 1) {
    CollectiveCall share = call;
    share.kind = CollectiveKind::broadcast;
    share.root = group.front();
    host.collectives().broadcast(share, data, 0);
  }
}

}  // namespace

void hierarchical_all_reduce(Links& links, SameHost& host, const CollectiveCall& call,
                             ElementSpan data, const Tuning& tuning) {
  std::size_t per_host = 0;
  for (const auto& group : host.groups()) per_host = std::max(per_host, group.size());
  const bool rails = every_host_has(host, per_host);
  const HierarchyPrediction model =
      predict_hierarchy(host.network_cost(), host.shm_cost(), links.world_size(),
                        static_cast<int>(host.groups().size()), static_cast<int>(per_host), rails,
                        static_cast<double>(data.bytes()));
  const bool hierarchical = model.hierarchical <= model.flat;
  log_lazily(LogLevel::debug, [&] {
    const std::string how = !hierarchical ? "the network over every rank"
                            : rails ? "hierarchical over " + std::to_string(host.groups().size()) +
                                          " hosts, " + std::to_string(per_host) +
                                          " ranks per host each reducing a block across hosts"
                                    : "hierarchical over " + std::to_string(host.groups().size()) +
                                          " hosts, one leader per host (hosts differ in ranks)";
    return call.describe() + ": " + how + " (cost model, rank 0's constants: hierarchical " +
           std::to_string(model.hierarchical * 1e6) + " us, flat " +
           std::to_string(model.flat * 1e6) + " us)";
  });
  if (!hierarchical) return all_reduce(links, call, data, tuning);
  if (rails) return all_reduce_by_rails(links, host, call, data, tuning);
  all_reduce_by_leaders(links, host, call, data, tuning);
}

void hierarchical_barrier(Links& links, SameHost& host, const CollectiveCall& call) {
  const std::vector<int>& group = host.group_of(links.rank());
  if (group.size() > 1) host.collectives().barrier(call);
  if (group.front() == links.rank()) {
    barrier_dissemination(host.across_hosts(links, 0), call);
  }
  if (group.size() > 1) host.collectives().barrier(call);
}

}  // namespace rlx
