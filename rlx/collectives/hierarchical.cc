#include "rlx/collectives/hierarchical.h"

#include "rlx/collectives/algorithms.h"

namespace rlx {

void all_reduce_by_rails(Links& links, SameHost& host, const CollectiveCall& call,
                         ElementSpan data) {
  ShmCollectives& local = host.collectives();
  local.reduce_scatter_blocks(call, data);
  const BlockSplit split{data.count, local.local_size()};
  const int index = local.local_rank();
  Links& rail = host.across_hosts(links, static_cast<std::size_t>(index));
  CollectiveCall rail_call = call;
  rail_call.count = split.length(index);
  auto* block = static_cast<std::byte*>(data.data) + split.begin(index) * size_of(data.dtype);
  all_reduce(rail, rail_call, {block, rail_call.count, data.dtype}, host.job_tuning());
  local.all_gather_blocks(call, data);
}

void all_reduce_by_leaders(Links& links, SameHost& host, const CollectiveCall& call,
                           ElementSpan data) {
  const std::vector<int>& group = host.group_of(links.rank());
  if (group.size() > 1) host.collectives().all_reduce(call, data);
  if (group.front() == links.rank()) {
    all_reduce(host.across_hosts(links, 0), call, data, host.job_tuning());
  }
  if (group.size() > 1) {
    CollectiveCall share = call;
    share.kind = CollectiveKind::broadcast;
    share.root = group.front();
    host.collectives().broadcast(share, data, 0);
  }
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
