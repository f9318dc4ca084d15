#include "rlx/collectives/same_host.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>

#include "rlx/transport/log.h"
#include "rlx/transport/shm/host_identity.h"
#include "rlx/transport/shm/single_copy.h"

namespace rlx {

// What every rank tells the others at set-up (128 bytes).
struct SameHost::HostRecord {
  std::uint64_t key = 0;
  std::uint64_t instance = 0;  // random; rank 0's names this run of the job's segments
  shm::SegmentOwner owner;     // this process, as its segment's name records it
  CostModel network;           // rank 0's are the job's
  CostModel shm;
  std::uint64_t forced_fingerprint = 0;  // of RLX_TUNE's rules: must be rank 0's
  std::uint64_t probe_address = 0;       // of SameHost::probe_word_, which holds `instance`
  std::uint8_t allowed = 0;  // RLX_SHM is not 0, and the job has a token to name segments by
  char name[31] = {};        // the host's, for messages (truncated)
};

struct SameHost::Local {
  Local(shm::Node built, const launch_env::LaunchEnv& env, Mailbox& mailbox,
        const FailureLatch& latch, const Hooks& hooks, shm::SpinPolicy policy,
        SingleCopyPeers single_copy)
      : node(std::move(built)),
        collectives(node, latch, env.timeout, policy,
                    {hooks.site, hooks.fail, hooks.describe_silent_peers}, std::move(single_copy)),
        point_to_point(node, mailbox, latch, env.timeout, policy, {hooks.site, hooks.fail}) {}

  shm::Node node;
  ShmCollectives collectives;
  shm::PointToPoint point_to_point;
};

namespace {

std::string list_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (const int r : ranks) text += (text.empty() ? "" : ",") + std::to_string(r);
  return text;
}

// Ranks that share cores poll by yielding; a rank with a core polls longer.
shm::SpinPolicy spin_policy(int ranks_here) {
  if (launch_env::ranks_share_cores(ranks_here))
    return {.spin = std::chrono::microseconds(20), .yield = true};
  return {.spin = std::chrono::microseconds(100), .yield = false};
}

}  // namespace

std::vector<std::vector<int>> SameHost::candidate_groups(
    const std::vector<HostRecord>& records) const {
  std::map<std::uint64_t, std::vector<int>> by_host;
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < world_size_; ++r) {
    const HostRecord& record = records[static_cast<std::size_t>(r)];
    if (record.allowed) {
      by_host[record.key].push_back(r);
    } else {
      groups.push_back({r});
    }
  }
  for (auto& [key, ranks] : by_host) groups.push_back(std::move(ranks));
  std::sort(groups.begin(), groups.end());
  return groups;
}

void SameHost::agree(bool ok, std::vector<std::vector<int>>& groups, const char* step) {
  std::vector<std::uint8_t> all(static_cast<std::size_t>(world_size_));
  const std::uint8_t mine = ok ? 1 : 0;
  hooks_.all_gather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));
  std::vector<std::vector<int>> kept;
  for (auto& group : groups) {
    std::vector<int> failed;
    for (const int r : group) {
      if (!all[static_cast<std::size_t>(r)]) failed.push_back(r);
    }
    if (failed.empty() || group.size() == 1) {
      kept.push_back(std::move(group));
      continue;
    }
    if (std::find(group.begin(), group.end(), rank_) != group.end()) {
      log_lazily(LogLevel::warn, [&] {
        return std::string("shared memory with ranks ") + list_ranks(group) + " is off: rank(s) " +
               list_ranks(failed) + " could not " + step +
               " their segments (see their warnings); using the network instead";
      });
    }
    for (const int r : group) kept.push_back({r});
  }
  std::sort(kept.begin(), kept.end());
  groups = std::move(kept);
}

void SameHost::build_group_index() {
  group_index_.assign(static_cast<std::size_t>(world_size_), -1);
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (const int r : groups_[g]) group_index_[static_cast<std::size_t>(r)] = static_cast<int>(g);
  }
}

namespace {

const std::vector<int>& group_holding(const std::vector<std::vector<int>>& groups, int rank) {
  for (const auto& group : groups) {
    if (std::find(group.begin(), group.end(), rank) != group.end()) return group;
  }
  return groups.front();  // unreachable: every rank is in a group
}

}  // namespace

std::vector<SameHost::HostRecord> SameHost::exchange_records(const launch_env::LaunchEnv& env,
                                                             const Tuning& tuning,
                                                             const shm::HostIdentity& host) {
  static_assert(sizeof(HostRecord) == 128);
  HostRecord mine;
  mine.key = host.key;
  mine.network = tuning.cost;
  mine.shm = tuning.shm_cost;
  mine.instance = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  probe_word_ = mine.instance;
  mine.probe_address = reinterpret_cast<std::uintptr_t>(&probe_word_);
  mine.owner = shm::SegmentOwner::self();
  mine.forced_fingerprint = tuning.forced_fingerprint;
  mine.allowed = env.shm && !env.job_token.empty();
  std::strncpy(mine.name, host.name.c_str(), sizeof mine.name - 1);
  std::vector<HostRecord> records(static_cast<std::size_t>(world_size_));
  hooks_.all_gather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(records)));
  return records;
}

void SameHost::check_same_forced_algorithms(const std::vector<HostRecord>& records) const {
  std::string differ;
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].forced_fingerprint != records.front().forced_fingerprint) {
      differ += (differ.empty() ? "" : ",") + std::to_string(r);
    }
  }
  if (differ.empty()) return;
  throw CollectiveError(ErrorKind::invalid_argument,
                        {.rank = rank_, .world_size = world_size_, .operation = "start the group"},
                        (differ.find(',') == std::string::npos ? "rank " + differ + " forces"
                                                               : "ranks " + differ + " force") +
                            " other algorithms than rank 0 (RLX_TUNE or RLX_ALL_REDUCE_ALGORITHM "
                            "differ)",
                        "give every rank the same RLX_TUNE and RLX_ALL_REDUCE_ALGORITHM: ranks "
                        "that choose differently would wait for each other's other steps");
}

std::vector<shm::SharedSegment> SameHost::map_segments(const launch_env::LaunchEnv& env,
                                                       const std::vector<HostRecord>& records,
                                                       std::vector<std::vector<int>>& groups,
                                                       const shm::NodeShape& shape) {
  const std::string directory = shm::kDefaultDirectory;
  const std::vector<int> members = group_holding(groups, rank_);
  // Every member's segment name, in group order.
  std::vector<std::string> names;
  for (const int r : members) {
    names.push_back(shm::SharedSegment::name_for(env.job_token, records.front().instance, r,
                                                 records[static_cast<std::size_t>(r)].owner));
  }
  // Whatever happens from here (a peer killed part way, say), no name of
  // this group outlives the set-up: every rank removes them all.
  struct RemoveNames {
    const std::vector<std::string>& names;
    const std::string& directory;
    ~RemoveNames() {
      if (names.size() < 2) return;
      for (const auto& name : names) shm::SharedSegment::remove(directory, name);
    }
  } remove_names{names, directory};
  const auto name_of = [&](int r) -> const std::string& {
    return names[static_cast<std::size_t>(std::find(members.begin(), members.end(), r) -
                                          members.begin())];
  };

  const ErrorSite site = hooks_.site("set up shared memory", -1, {});
  std::optional<shm::SharedSegment> own;
  if (members.size() > 1) {
    shm::remove_orphaned_segments(directory);  // what a killed start left on this host
    try {
      own = shm::Node::create_own(directory, name_of(rank_), shape, site);
    } catch (const CollectiveError& e) {
      log_lazily(LogLevel::warn, [&] { return std::string(e.what()); });
    }
  }
  agree(members.size() == 1 || own.has_value(), groups, "create");

  std::vector<shm::SharedSegment> segments;
  if (members.size() > 1 && own.has_value()) {
    const Deadline deadline = Clock::now() + env.connect_timeout;
    const auto failed = [this] { return latch_.tripped(); };
    try {
      for (const int r : members) {
        segments.push_back(r == rank_ ? std::move(*own)
                                      : shm::SharedSegment::open(directory, name_of(r),
                                                                 shape.segment_bytes(), deadline,
                                                                 site, failed));
      }
    } catch (const CollectiveError& e) {
      log_lazily(LogLevel::warn, [&] { return std::string(e.what()); });
      segments.clear();
    }
  }
  agree(members.size() <= 1 || !segments.empty(), groups, "map");
  return segments;
}

SameHost::SameHost(const launch_env::LaunchEnv& env, const Tuning& tuning, int rank, int world_size,
                   Mailbox& mailbox, FailureLatch& latch, Hooks hooks)
    : rank_(rank),
      world_size_(world_size),
      hooks_(std::move(hooks)),
      latch_(latch),
      job_tuning_(tuning) {
  const shm::HostIdentity host = shm::this_host(shm::kDefaultDirectory);
  const std::vector<HostRecord> records = exchange_records(env, tuning, host);
  if (!env.shm)
    log_lazily(LogLevel::info, [] { return std::string("RLX_SHM=0: the network to every peer"); });
  check_same_forced_algorithms(records);
  network_cost_ = records.front().network;
  shm_cost_ = records.front().shm;
  job_tuning_.cost = network_cost_;
  job_tuning_.shm_cost = shm_cost_;
  job_tuning_.cost_source = job_tuning_.shm_cost_source = "rank 0's constants";

  std::vector<std::vector<int>> groups = candidate_groups(records);
  const shm::NodeShape shape{.local_size = static_cast<int>(group_holding(groups, rank).size())};
  std::vector<shm::SharedSegment> segments = map_segments(env, records, groups, shape);
  groups_ = std::move(groups);
  build_group_index();

  const std::vector<int>& final_group = group_of(rank);
  // Only a rule asks for single copy (no default chooses it), and a refused
  // probe can leave a line in the kernel's log (Yama, audit): probe only
  // then. The rules are rank 0's on every rank (checked above).
  const bool asked =
      std::any_of(tuning.forced.begin(), tuning.forced.end(),
                  [](const ForcedAlgorithm& f) { return f.algorithm == "single_copy"; });
  SingleCopyPeers single_copy =
      asked ? agree_on_single_copy(records, final_group)
            : SingleCopyPeers{.unavailable = "not probed: no RLX_TUNE rule names single_copy"};
  if (final_group.size() > 1) {
    const int local_rank = static_cast<int>(
        std::find(final_group.begin(), final_group.end(), rank) - final_group.begin());
    local_ = std::make_unique<Local>(shm::Node(shape, local_rank, final_group, std::move(segments)),
                                     env, mailbox, latch, hooks_, spin_policy(env.ranks_here()),
                                     std::move(single_copy));
    for (const int peer : final_group) {
      if (peer != rank) mailbox.end_reported_by_own_channel(peer);
    }
    shm::Doorbell* bell = &local_->node.control(local_rank).bell;
    latch.set_waker([bell] { bell->wake(); });
    log_lazily(LogLevel::info, [&] {
      return "shared memory with ranks " + list_ranks(final_group) + " on host " + host.name +
             " (" + format_bytes(shape.segment_bytes()) + " per rank)";
    });
  }
  log_paths(records);
}

SingleCopyPeers SameHost::agree_on_single_copy(const std::vector<HostRecord>& records,
                                               const std::vector<int>& members) {
  if (unused()) return {.unavailable = "no two ranks share memory"};
  const shm::SegmentOwner self = records[static_cast<std::size_t>(rank_)].owner;
  std::string why_not;
  for (const int peer : members) {
    if (peer == rank_ || members.size() == 1) continue;
    const HostRecord& theirs = records[static_cast<std::size_t>(peer)];
    why_not = theirs.owner.pid_namespace != self.pid_namespace
                  ? "rank " + std::to_string(peer) + " is in another pid namespace"
                  : shm::probe_peer_memory(theirs.owner.pid, theirs.probe_address, theirs.instance);
    if (!why_not.empty()) {
      why_not = "rank " + std::to_string(rank_) + " cannot read rank " + std::to_string(peer) +
                "'s memory: " + why_not;
      break;
    }
  }
  std::vector<std::uint8_t> all(static_cast<std::size_t>(world_size_));
  const std::uint8_t mine = why_not.empty() ? 1 : 0;
  hooks_.all_gather(std::as_bytes(std::span(&mine, 1)), std::as_writable_bytes(std::span(all)));
  std::vector<int> refused;
  for (const int r : members) {
    if (!all[static_cast<std::size_t>(r)]) refused.push_back(r);
  }
  if (members.size() == 1) return {.unavailable = "no peer on this host"};
  if (refused.empty()) {
    SingleCopyPeers peers{.unavailable = {}};
    for (const int r : members)
      peers.pids.push_back(records[static_cast<std::size_t>(r)].owner.pid);
    return peers;
  }
  if (why_not.empty()) {
    why_not =
        "rank(s) " + list_ranks(refused) + " cannot read their peers' memory (their log says why)";
  }
  log_lazily(LogLevel::info, [&] { return "single copy is off on this host: " + why_not; });
  return {.unavailable = why_not};
}

// Said at info level after the backend's own line per peer ("tcp to ..."),
// which is how the connection was made, not the way calls go.
void SameHost::log_paths(const std::vector<HostRecord>& records) const {
  if (!log_enabled(LogLevel::info)) return;
  const HostRecord& mine = records[static_cast<std::size_t>(rank_)];
  for (int peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_) continue;
    const HostRecord& theirs = records[static_cast<std::size_t>(peer)];
    const std::string host(theirs.name);
    std::string why;
    if (shares_memory_with(peer)) {
      why = "shared memory (same host " + host + ")";
    } else if (theirs.key != mine.key) {
      why = "the network (rank " + std::to_string(peer) + " is on host " + host + ")";
    } else if (!mine.allowed || !theirs.allowed) {
      why = "the network (same host, but RLX_SHM=0 or no job token on one of the two)";
    } else {
      why = "the network (same host, but shared memory could not be set up: see the warnings)";
    }
    log(LogLevel::info, "peer " + std::to_string(peer) + ": calls go through " + why);
  }
}

void SameHost::finish_calls() {
  if (!local_) return;
  if (latch_.tripped()) {
    // The failure was reported; a mismatch in calls that ran ahead may be
    // what caused it, and is reported nowhere else.
    const std::string mismatch = local_->collectives.unchecked_mismatch();
    if (!mismatch.empty()) log(LogLevel::warn, "closing after a failure: " + mismatch);
    return;
  }
  try {
    local_->collectives.finish_deferred_checks();
  } catch (const CollectiveError& e) {
    log(LogLevel::warn, std::string("closing: ") + e.what());
  }
}

SameHost::~SameHost() {
  if (!local_) return;
  latch_.set_waker({});
  // A rank that failed has told its peers why over the network; a clean
  // close is announced here, where peers waiting on this rank look.
  if (!latch_.tripped()) local_->node.announce_close();
}

const std::vector<int>& SameHost::group_of(int rank) const {
  return groups_[static_cast<std::size_t>(group_index_[static_cast<std::size_t>(rank)])];
}

bool SameHost::shares_memory_with(int rank) const {
  return rank != rank_ && group_index_[static_cast<std::size_t>(rank)] ==
                              group_index_[static_cast<std::size_t>(rank_)];
}

Links& SameHost::across_hosts(Links& parent, std::size_t index) {
  auto& links = across_hosts_[index];
  if (!links) {
    std::vector<int> ranks;
    for (const auto& group : groups_) ranks.push_back(group.at(index));
    links = std::make_unique<SubgroupLinks>(parent, std::move(ranks));
  }
  return *links;
}

ShmCollectives& SameHost::collectives() { return local_->collectives; }

shm::PointToPoint& SameHost::point_to_point() { return local_->point_to_point; }

}  // namespace rlx
