#include "rlx/collectives/cost_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

#include "rlx/transport/errors.h"
#include "rlx/transport/hostfile_reader.h"

namespace rlx {

AlgorithmWork all_reduce_ring_work(int world_size, double bytes) {
  const double n = world_size;
  return {.steps = 2 * (n - 1),
          .bytes_sent = 2 * (n - 1) / n * bytes,
          .bytes_reduced = (n - 1) / n * bytes};
}

AlgorithmWork all_reduce_recursive_doubling_work(int world_size, double bytes) {
  const auto pow2 = std::bit_floor(static_cast<unsigned>(world_size));
  const double rounds = std::countr_zero(pow2);
  const double folded = static_cast<unsigned>(world_size) > pow2 ? 1 : 0;
  return {.steps = rounds + 2 * folded,
          .bytes_sent = (rounds + 2 * folded) * bytes,
          .bytes_reduced = (rounds + folded) * bytes};
}

AlgorithmWork all_reduce_shm_work(int local_size, double bytes) {
  const double n = local_size;
  // Two ranks each reduce the whole buffer (reduce_pair_pipelined).
  const double reduced = local_size == 2 ? bytes : (n - 1) / n * bytes;
  return {.steps = 1, .bytes_sent = 2 * (n - 1) / n * bytes, .bytes_reduced = reduced};
}

double all_reduce_network_seconds(const CostModel& network, int world_size, double bytes) {
  if (world_size <= 1) return 0;
  return std::min(all_reduce_ring_work(world_size, bytes).seconds(network),
                  all_reduce_recursive_doubling_work(world_size, bytes).seconds(network));
}

HierarchyPrediction predict_hierarchy(const CostModel& network, const CostModel& shm, int ranks,
                                      int hosts, int per_host, bool rails, double bytes) {
  const double inside = all_reduce_shm_work(per_host, bytes).seconds(shm);
  // Rails: a reduce-scatter and an all-gather inside (one shared-memory
  // all-reduce's work, and a step more), one block per rank across hosts.
  // Leaders: an all-reduce inside, the whole buffer across, a broadcast.
  const double across = rails ? all_reduce_network_seconds(network, hosts, bytes / per_host)
                              : all_reduce_network_seconds(network, hosts, bytes);
  const double share = rails ? shm.alpha : shm.alpha + shm.beta * bytes;
  return {.hierarchical = inside + across + share,
          .flat = all_reduce_network_seconds(network, ranks, bytes)};
}

std::size_t all_reduce_crossover_bytes(const CostModel& cost, int world_size) {
  // Both costs are linear in the size: fixed + per_byte * bytes.
  const AlgorithmWork ring = all_reduce_ring_work(world_size, 1);
  const AlgorithmWork doubling = all_reduce_recursive_doubling_work(world_size, 1);
  const double extra_fixed = (ring.steps - doubling.steps) * cost.alpha;
  const double saved_per_byte = (doubling.bytes_sent - ring.bytes_sent) * cost.beta +
                                (doubling.bytes_reduced - ring.bytes_reduced) * cost.gamma;
  if (extra_fixed <= 0) return 0;
  if (saved_per_byte <= 0) return std::numeric_limits<std::size_t>::max();
  return static_cast<std::size_t>(std::ceil(extra_fixed / saved_per_byte));
}

namespace {

[[noreturn]] void bad_file(const std::string& path, int line, const std::string& what) {
  throw CollectiveError(ErrorKind::invalid_argument, {.operation = "read cost model"},
                        "RLX_COST_MODEL=" + path +
                            (line > 0 ? ", line " + std::to_string(line) : std::string()) + ": " +
                            what,
                        "bench/scaling --write-cost-model writes this file; lines are "
                        "'dedicated|shared|shm-dedicated|shm-shared ALPHA BETA GAMMA' in s, s/B, "
                        "s/B");
}

}  // namespace

CostModelFile parse_cost_model_file(const std::string& text, const std::string& path) {
  CostModelFile file;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::string situation;
    if (!(fields >> situation)) continue;  // blank or comment
    CostModel cost;
    std::string extra;
    if (!(fields >> cost.alpha >> cost.beta >> cost.gamma) || (fields >> extra)) {
      bad_file(path, number, "expected '" + situation + " ALPHA BETA GAMMA'");
    }
    const bool sane = std::isfinite(cost.alpha) && std::isfinite(cost.beta) &&
                      std::isfinite(cost.gamma) && cost.alpha >= 0 && cost.beta >= 0 &&
                      cost.gamma >= 0 && cost.alpha + cost.beta + cost.gamma > 0;
    if (!sane) bad_file(path, number, "constants must be finite, not negative, not all zero");
    if (situation == "dedicated") {
      file.dedicated_cores = cost;
    } else if (situation == "shared") {
      file.shared_cores = cost;
    } else if (situation == "shm-dedicated") {
      file.shm_dedicated_cores = cost;
    } else if (situation == "shm-shared") {
      file.shm_shared_cores = cost;
    } else {
      bad_file(path, number,
               "'" + situation + "' is none of dedicated, shared, shm-dedicated, shm-shared");
    }
  }
  if (!file.dedicated_cores && !file.shared_cores && !file.shm_dedicated_cores &&
      !file.shm_shared_cores) {
    bad_file(path, 0, "no constants in it");
  }
  return file;
}

CostModelFile read_cost_model_file(const std::string& path,
                                   std::chrono::milliseconds connect_timeout) {
  std::string text;
  try {
    text = hostfile::read_text(path, connect_timeout, "cost-model file");
  } catch (const hostfile::ReadError& error) {
    // Its message starts with the path, which bad_file names itself.
    const std::string what = error.what();
    bad_file(path, 0, what.starts_with(path + ": ") ? what.substr(path.size() + 2) : what);
  }
  return parse_cost_model_file(text, path);
}

}  // namespace rlx
