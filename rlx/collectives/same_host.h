// The same-host path of the transports whose collectives run over Links
// (TCP, verbs): ranks that share a host exchange messages and run
// collectives through shared memory; every other pair keeps the network.
//
// Set-up rides on the backend's authenticated connections, which every rank
// joins whatever its settings say, so all ranks reach the same conclusion:
//  1. every rank gathers every rank's host identity (rlx/transport/shm/host_identity.h)
//     and whether RLX_SHM allows it;
//  2. each rank of a host with others creates its segment, named from the
//     job token (mode 0600, reserved up front), and the ranks gather who could;
//  3. they map their host peers' segments and gather who could;
//  4. each rank unlinks its own name: from then on nothing is left in /dev/shm
//     whatever happens to the job.
// A host where any step failed (a full /dev/shm, say) keeps the network,
// with a warning naming the reason; the others still share memory.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/collectives/shm_collectives.h"
#include "rlx/collectives/subgroup_links.h"
#include "rlx/collectives/tuning.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/mailbox.h"
#include "rlx/transport/shm/host_identity.h"
#include "rlx/transport/shm/point_to_point.h"

namespace rlx {

class SameHost {
 public:
  struct Hooks {
    // Gathers `mine` (the same size on every rank) from every rank, in rank
    // order, over the backend's own links.
    std::function<void(std::span<const std::byte> mine, std::span<std::byte> all)> all_gather;
    std::function<ErrorSite(std::string_view operation, int peer, std::string sizes)> site;
    std::function<void(const CollectiveError& error)> fail;
    std::function<std::string()> describe_silent_peers = [] { return std::string(); };
  };

  // Every rank of the job must construct it at the same point of its set-up.
  // Once it shares memory, `latch` wakes this rank's sleepers when it trips.
  // `tuning` is this rank's; rank 0's cost models are the job's (costs()).
  SameHost(const launch_env::LaunchEnv& env, const Tuning& tuning, int rank, int world_size,
           Mailbox& mailbox, FailureLatch& latch, Hooks hooks);
  ~SameHost();
  SameHost(const SameHost&) = delete;
  // Before a clean close: checks the call lines this rank's collectives
  // left unchecked (ShmCollectives::finish_deferred_checks). A mismatch or
  // a lost peer found then fails the transport, which tells the other
  // ranks, and is logged here: a close cannot throw. After a failure it
  // only logs a mismatch in the lines already posted, without waiting.
  void finish_calls();
  SameHost& operator=(const SameHost&) = delete;

  // The ranks that share memory, in groups sorted by rank (a rank without
  // such peers is alone in its group): the same on every rank.
  const std::vector<std::vector<int>>& groups() const { return groups_; }
  const std::vector<int>& group_of(int rank) const;
  // True when this rank and `rank` (another) exchange through shared memory.
  bool shares_memory_with(int rank) const;
  // True when every rank of the job shares this host's memory.
  bool spans_job() const { return groups_.size() == 1; }
  // True when no two ranks share memory: the network carries everything.
  bool unused() const { return groups_.size() == static_cast<std::size_t>(world_size_); }

  // Rank 0's network and shared-memory cost models: every rank decides by
  // the same constants, so all choose the same algorithm.
  const CostModel& network_cost() const { return network_cost_; }
  const CostModel& shm_cost() const { return shm_cost_; }
  // This rank's tuning with rank 0's cost models: what collectives run
  // among some ranks of the job (a hierarchical collective's steps across
  // hosts) choose by, so every rank of such a step chooses alike.
  const Tuning& job_tuning() const { return job_tuning_; }

  // The ranks at `index` in every host's group (a rail; index 0: the
  // leaders) as a Links over `parent`, made once and kept.
  Links& across_hosts(Links& parent, std::size_t index);

  // Only when this rank has peers to share memory with (group size > 1).
  ShmCollectives& collectives();
  shm::PointToPoint& point_to_point();

 private:
  struct HostRecord;
  struct Local;
  // Step 1: every rank's HostRecord, in rank order.
  std::vector<HostRecord> exchange_records(const launch_env::LaunchEnv& env, const Tuning& tuning,
                                           const shm::HostIdentity& host);
  // Steps 2 and 3 for this rank's group of `groups` (which agree() splits
  // where a rank failed a step): the segments of its ranks, in group order,
  // or none. No name of the group is left in the directory afterwards.
  std::vector<shm::SharedSegment> map_segments(const launch_env::LaunchEnv& env,
                                               const std::vector<HostRecord>& records,
                                               std::vector<std::vector<int>>& groups,
                                               const shm::NodeShape& shape);
  // Throws invalid_argument on every rank when a rank's RLX_TUNE differs from rank 0's.
  void check_same_forced_algorithms(const std::vector<HostRecord>& records) const;
  // Which ranks could share memory, by host identity and RLX_SHM.
  std::vector<std::vector<int>> candidate_groups(const std::vector<HostRecord>& records) const;
  // Gathers every rank's `ok`; groups with a rank that is not ok split into singletons.
  void agree(bool ok, std::vector<std::vector<int>>& groups, const char* step);
  void build_group_index();
  // Whether the ranks of this rank's group (`members`, more than one) read
  // each other's memory directly: every rank probes its peers, then all
  // agree (a collective call of every rank of the job, grouped or not).
  SingleCopyPeers agree_on_single_copy(const std::vector<HostRecord>& records,
                                       const std::vector<int>& members);
  // The debug log's line per peer: which path, and why.
  void log_paths(const std::vector<HostRecord>& records) const;

  const int rank_;
  const int world_size_;
  // A random word the peers read from this process at set-up to prove they
  // can (rlx/transport/shm/single_copy.h); its address is in HostRecord.
  std::uint64_t probe_word_ = 0;
  Hooks hooks_;
  std::vector<std::vector<int>> groups_;
  std::vector<int> group_index_;  // [rank] -> index into groups_
  std::unique_ptr<Local> local_;
  FailureLatch& latch_;
  CostModel network_cost_;
  CostModel shm_cost_;
  Tuning job_tuning_;
  std::map<std::size_t, std::unique_ptr<SubgroupLinks>> across_hosts_;
};

}  // namespace rlx
