// The alpha-beta-gamma cost model of the all-reduce algorithms (Thakur,
// Rabenseifner and Gropp, "Optimization of Collective Communication
// Operations in MPICH", 2005): a step costs alpha, each byte a rank sends
// costs beta, each byte it reduces costs gamma. The all_reduce algorithm
// thresholds come from it; docs/SCALING.md fits its constants from measured
// sweeps (bench/scaling), checks it against runs across slowed links and
// predicts larger jobs.
#pragma once

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

// A cost model file (RLX_COST_MODEL), as bench/scaling --write-cost-model
// writes it: '#' comments, and lines "dedicated ALPHA BETA GAMMA" (a core per
// rank) and "shared ALPHA BETA GAMMA" (ranks share cores), in seconds, s/B, s/B.
struct CostModelFile {
  std::optional<CostModel> dedicated_cores;
  std::optional<CostModel> shared_cores;
};

// Parses a cost model file's text; throws CollectiveError (invalid_argument)
// naming `path`, the line and what is wrong.
CostModelFile parse_cost_model_file(const std::string& text, const std::string& path);
// Reads and parses the file at `path`.
CostModelFile read_cost_model_file(const std::string& path);

}  // namespace rlx
