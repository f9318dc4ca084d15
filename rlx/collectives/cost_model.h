// The alpha-beta-gamma cost model of the all-reduce algorithms (Thakur,
// Rabenseifner and Gropp, "Optimization of Collective Communication
// Operations in MPICH", 2005): a step costs alpha, each byte a rank sends
// costs beta, each byte it reduces costs gamma. The all_reduce algorithm
// thresholds come from it; docs/SCALING.md fits its constants from measured
// sweeps (bench/scaling), checks it against runs across slowed links and
// predicts larger jobs.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace rlx {

struct CostModel {
  double alpha = 0;  // seconds per step (latency)
  double beta = 0;   // seconds per byte a rank sends
  double gamma = 0;  // seconds per byte a rank reduces
};

// How much of each an algorithm does on one rank: its time is
// steps * alpha + bytes_sent * beta + bytes_reduced * gamma.
struct AlgorithmWork {
  double steps = 0;
  double bytes_sent = 0;
  double bytes_reduced = 0;

  double seconds(const CostModel& cost) const {
    return steps * cost.alpha + bytes_sent * cost.beta + bytes_reduced * cost.gamma;
  }
};

// Reduce-scatter then all-gather around the ring: 2(n-1) steps of bytes/n.
AlgorithmWork all_reduce_ring_work(int world_size, double bytes);

// log2(p) exchanges of the whole buffer, p the largest power of two <= n;
// when n > p the extra ranks fold in first and get the result last (2 more
// steps, 1 more reduction).
AlgorithmWork all_reduce_recursive_doubling_work(int world_size, double bytes);

// All-reduce among the ranks of one host through shared memory
// (shm_collectives.h): each rank stages out and copies in what a ring sends,
// and reduces its own block (two ranks: the whole buffer), in one step of
// its own constants (the "shm-*" lines: copies through shared memory, not
// a network). The rails' reduce-scatter and all-gather inside a host keep
// the split at two ranks too; the model's gamma term overstates them there.
AlgorithmWork all_reduce_shm_work(int local_size, double bytes);

// The network all-reduce's predicted seconds at `world_size` ranks: the
// faster of the ring and recursive doubling.
double all_reduce_network_seconds(const CostModel& network, int world_size, double bytes);

// A job of `hosts` hosts with `per_host` ranks on the largest, sharing
// memory inside each host: the predicted seconds of the hierarchical
// all-reduce (hierarchical.h; `rails` when every host has per_host ranks,
// else one leader per host), and of the flat network one over all `ranks`.
struct HierarchyPrediction {
  double hierarchical = 0;
  double flat = 0;
};
HierarchyPrediction predict_hierarchy(const CostModel& network, const CostModel& shm, int ranks,
                                      int hosts, int per_host, bool rails, double bytes);

// The smallest buffer (bytes) from which the ring is predicted no slower than
// recursive doubling at `world_size` ranks.
std::size_t all_reduce_crossover_bytes(const CostModel& cost, int world_size);

// The constants fitted on the development machine by bench/scaling
// (docs/SCALING.md says how, and how to refit them for another network):
// with a core per rank (2 ranks, 2 cores), the model's own assumption...
inline constexpr CostModel kFittedCost{.alpha = 9.3e-6, .beta = 0.206e-9, .gamma = 0.062e-9};
// ...and with two ranks per core (4 ranks, 2 cores), where every step also
// waits for the scheduler to run the ranks it depends on.
inline constexpr CostModel kFittedCostSharedCores{
    .alpha = 44.1e-6, .beta = 0.358e-9, .gamma = 0.232e-9};

// The same-host path's constants, fitted the same way from 2 ranks (a core
// each) and 4 ranks on this machine's 2 cores (bench/compare --lineup
// same-host, 2026-11-24; the fit puts the reduction's cost in beta).
inline constexpr CostModel kFittedShmCost{.alpha = 0.18e-6, .beta = 0.080e-9, .gamma = 0};
inline constexpr CostModel kFittedShmCostSharedCores{.alpha = 3.1e-6, .beta = 0.173e-9, .gamma = 0};

// A cost model file (RLX_COST_MODEL), as bench/scaling --write-cost-model
// writes it: '#' comments, and lines "dedicated ALPHA BETA GAMMA" (a core per
// rank) and "shared ALPHA BETA GAMMA" (ranks share cores), in seconds, s/B,
// s/B, for the network; "shm-dedicated" and "shm-shared" for shared memory.
struct CostModelFile {
  std::optional<CostModel> dedicated_cores;
  std::optional<CostModel> shared_cores;
  std::optional<CostModel> shm_dedicated_cores;
  std::optional<CostModel> shm_shared_cores;
};

// Parses a cost model file's text; throws CollectiveError (invalid_argument)
// naming `path`, the line and what is wrong.
CostModelFile parse_cost_model_file(const std::string& text, const std::string& path);
// Reads and parses the file at `path`, which may be anything a user points
// RLX_COST_MODEL at: read as hostfiles are (rlx/transport/hostfile_reader.h), at
// most 4 MiB and within `connect_timeout`.
CostModelFile read_cost_model_file(const std::string& path,
                                   std::chrono::milliseconds connect_timeout);

}  // namespace rlx
