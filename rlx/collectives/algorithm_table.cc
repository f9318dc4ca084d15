#include "rlx/collectives/algorithm_table.h"

#include <algorithm>
#include <bit>

#include "rlx/collectives/algorithms.h"
#include "rlx/collectives/hierarchical.h"
#include "rlx/collectives/same_host.h"
#include "rlx/collectives/step.h"
#include "rlx/transport/log.h"

namespace rlx {
namespace {

// ---- Where an algorithm can run -------------------------------------------

std::string anywhere(const CallSituation&) { return {}; }

std::string on_one_host(const CallSituation& s) {
  if (s.route == Path::shared_memory && !s.nested) return {};
  return "it needs every rank of the group on one host, sharing memory (this group's ranks "
         "reach each other " +
         std::string(s.route == Path::network ? "over the network only" : "across hosts") + ")";
}

std::string across_hosts(const CallSituation& s) {
  if (s.route == Path::hierarchical && !s.nested) return {};
  return "it needs a group spanning hosts whose ranks share memory within each host";
}

bool every_host_alike(const SameHost& host) {
  const std::size_t first = host.groups().front().size();
  return std::all_of(host.groups().begin(), host.groups().end(),
                     [&](const auto& group) { return group.size() == first; });
}

std::string across_hosts_alike(const CallSituation& s) {
  std::string why_not = across_hosts(s);
  if (why_not.empty() && !every_host_alike(*s.host)) {
    why_not = "it needs as many ranks on every host (use hierarchical_leaders)";
  }
  return why_not;
}

std::string element_per_rank(const CallSituation& s) {
  if (s.call.count >= static_cast<std::uint64_t>(s.ranks)) return {};
  return "it splits the buffer into a block per rank, and " + std::to_string(s.call.count) +
         " elements are fewer than " + std::to_string(s.ranks) + " ranks";
}

std::string power_of_two(const CallSituation& s) {
  if (std::has_single_bit(static_cast<unsigned>(s.ranks))) return {};
  return "it needs a power-of-two group, not " + std::to_string(s.ranks) + " ranks";
}

// One step with a send and a receive per peer.
std::string one_step_to_every_peer(const CallSituation& s) {
  if (static_cast<std::size_t>(s.ranks - 1) <= Step::kCapacity) return {};
  return "it exchanges with every peer in one step, which holds " +
         std::to_string(Step::kCapacity) + " peers, not " + std::to_string(s.ranks - 1);
}

// all_gather's direct exchange: every rank's block in one step.
std::string up_to_a_step_of_ranks(const CallSituation& s) {
  if (static_cast<std::size_t>(s.ranks) <= Step::kCapacity) return {};
  return "it takes every rank's block in one step, which holds " + std::to_string(Step::kCapacity) +
         " ranks, not " + std::to_string(s.ranks);
}

std::string fits_call_lines(const CallSituation& s) {
  std::string why_not = on_one_host(s);
  if (!why_not.empty()) return why_not;
  const std::size_t all = s.bytes * static_cast<std::size_t>(s.ranks);
  const std::size_t capacity = s.host->collectives().inline_capacity();
  if (all <= capacity) return {};
  return "the root's " + format_bytes(all) + " are over the call lines' " + format_bytes(capacity);
}

// Single copy (shm_single_copy.cc): one host whose ranks could all read
// each other's memory at set-up. Only RLX_TUNE chooses it: on the machine
// the defaults were measured on, the staging slots beat it at every size
// (docs/BENCHMARKS.md, "Single copy").
std::string single_copy_works(const CallSituation& s) {
  std::string why_not = on_one_host(s);
  if (!why_not.empty()) return why_not;
  const std::string& off = s.host->collectives().single_copy_unavailable();
  return off.empty() ? std::string() : "single copy is off on this host: " + off;
}

// ---- How each runs --------------------------------------------------------

ShmCollectives& shm(AlgorithmContext& c) { return c.host->collectives(); }

void network_all_reduce_ring(AlgorithmContext& c, const CollectiveCall& call,
                             const CollectiveArgs& a) {
  all_reduce_ring(c.links, call, a.output);
}
void network_all_reduce_doubling(AlgorithmContext& c, const CollectiveCall& call,
                                 const CollectiveArgs& a) {
  all_reduce_recursive_doubling(c.links, call, a.output);
}

// ---- The tables -----------------------------------------------------------

const Algorithm kAllReduce[] = {
    {"recursive_doubling", Path::network, "any group", anywhere, network_all_reduce_doubling},
    {"ring", Path::network, "at least an element per rank", element_per_rank,
     network_all_reduce_ring},
    {"shared_memory", Path::shared_memory, "every rank on one host", on_one_host,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).all_reduce(call, a.output);
     }},
    {"hierarchical_rails", Path::hierarchical, "hosts with as many ranks each", across_hosts_alike,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_reduce_by_rails(c.links, *c.host, call, a.output);
     }},
    {"hierarchical_leaders", Path::hierarchical, "a group spanning hosts", across_hosts,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_reduce_by_leaders(c.links, *c.host, call, a.output);
     }},
};

const Algorithm kAllGather[] = {
    {"recursive_doubling", Path::network, "power-of-two groups", power_of_two,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_gather_recursive_doubling(c.links, call, a.input, a.output);
     }},
    {"direct", Path::network, "up to 64 ranks", up_to_a_step_of_ranks,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_gather_direct(c.links, call, a.input, a.output);
     }},
    {"ring", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_gather_ring(c.links, call, a.input, a.output);
     }},
    {"shared_memory", Path::shared_memory, "every rank on one host", on_one_host,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).all_gather(call, a.input, a.output);
     }},
    {"single_copy", Path::shared_memory, "one host whose ranks may read each other's memory",
     single_copy_works,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).all_gather_single_copy(call, a.input, a.output);
     }},
};

const Algorithm kReduceScatter[] = {
    {"ring", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       reduce_scatter(c.links, call, a.input, a.output);
     }},
    {"shared_memory", Path::shared_memory, "every rank on one host", on_one_host,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).reduce_scatter(call, a.input, a.output);
     }},
};

const Algorithm kBroadcast[] = {
    {"binomial", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       broadcast(c.links, call, a.output);
     }},
    {"shared_memory", Path::shared_memory, "every rank on one host", on_one_host,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).broadcast(call, a.output, call.root);
     }},
    {"single_copy", Path::shared_memory, "one host whose ranks may read each other's memory",
     single_copy_works,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).broadcast_single_copy(call, a.output, call.root);
     }},
};

const Algorithm kBarrier[] = {
    {"dissemination", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs&) {
       barrier_dissemination(c.links, call);
     }},
    {"shared_memory", Path::shared_memory, "every rank on one host", on_one_host,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs&) {
       shm(c).barrier(call);
     }},
    {"hierarchical", Path::hierarchical, "a group spanning hosts", across_hosts,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs&) {
       hierarchical_barrier(c.links, *c.host, call);
     }},
};

const Algorithm kAllToAll[] = {
    {"direct", Path::network, "up to 65 ranks", one_step_to_every_peer,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_to_all_direct(c.links, call, a.input, a.output);
     }},
    {"pairwise", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_to_all_pairwise(c.links, call, a.input, a.output);
     }},
    {"shared_memory", Path::shared_memory, "every rank on one host", on_one_host,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).all_to_all(call, a.input, a.output);
     }},
};

const Algorithm kAllGatherV[] = {
    {"direct", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_gather_v(c.links, call, a.input, a.output, a.counts);
     }},
};

const Algorithm kAllToAllV[] = {
    {"direct", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       all_to_all_v(c.links, call, a.input, a.counts, a.output, a.recv_counts);
     }},
};

const Algorithm kReduce[] = {
    {"binomial", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       reduce_binomial(c.links, call, a.output);
     }},
    {"shared_memory", Path::shared_memory, "every rank on one host", on_one_host,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).reduce(call, a.output);
     }},
};

const Algorithm kGather[] = {
    {"direct", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       gather_direct(c.links, call, a.input, a.output);
     }},
    {"shared_memory", Path::shared_memory, "every rank on one host", on_one_host,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).gather(call, a.input, a.output);
     }},
    {"single_copy", Path::shared_memory, "one host whose ranks may read each other's memory",
     single_copy_works,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).gather_single_copy(call, a.input, a.output);
     }},
};

const Algorithm kScatter[] = {
    {"direct", Path::network, "any group", anywhere,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       scatter_direct(c.links, call, a.input, a.output);
     }},
    {"shared_memory", Path::shared_memory, "one host, the root's input within the call lines",
     fits_call_lines,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).scatter_inline(call, a.input, a.output);
     }},
    {"single_copy", Path::shared_memory, "one host whose ranks may read each other's memory",
     single_copy_works,
     [](AlgorithmContext& c, const CollectiveCall& call, const CollectiveArgs& a) {
       shm(c).scatter_single_copy(call, a.input, a.output);
     }},
};

// ---- The defaults ---------------------------------------------------------

const Algorithm& row(std::span<const Algorithm> table, std::string_view name) {
  return *std::find_if(table.begin(), table.end(),
                       [&](const Algorithm& a) { return a.name == name; });
}

// The row `name` with its reason, built only when the debug log prints.
template <class Why>
Choice pick(std::span<const Algorithm> table, std::string_view name, Why&& why) {
  return {&row(table, name), log_enabled(LogLevel::debug) ? std::string(why()) : std::string()};
}

std::string shm_reason(const CallSituation& s) {
  // These post every block of their input, the others one buffer or block.
  const CollectiveKind kind = s.call.kind;
  const bool whole_input = kind == CollectiveKind::all_to_all ||
                           kind == CollectiveKind::reduce_scatter ||
                           kind == CollectiveKind::scatter;
  const std::size_t posted = whole_input ? s.bytes * static_cast<std::size_t>(s.ranks) : s.bytes;
  return "every rank on one host: " + s.host->collectives().protocol(posted);
}

// The collective's shared-memory row (its path says so), or null.
const Algorithm* shm_row(std::span<const Algorithm> table) {
  for (const Algorithm& algorithm : table) {
    if (algorithm.path == Path::shared_memory) return &algorithm;
  }
  return nullptr;
}

// Shared memory when the whole group shares it and the collective has a
// shared-memory algorithm, else `network`.
template <class Network>
Choice shm_else(std::span<const Algorithm> table, const CallSituation& s, Network&& network) {
  if (s.route == Path::shared_memory && !s.nested) {
    if (const Algorithm* shm = shm_row(table)) {
      return {shm, log_enabled(LogLevel::debug) ? shm_reason(s) : std::string()};
    }
  }
  return network();
}

Choice network_all_reduce(const CallSituation& s, const Tuning& tuning) {
  const CostModel& cost = s.host && !s.nested ? s.host->network_cost() : tuning.cost;
  const std::size_t crossover = all_reduce_crossover_bytes(cost, s.ranks);
  const bool ring = element_per_rank(s).empty() && s.bytes >= crossover;
  return pick(kAllReduce, ring ? "ring" : "recursive_doubling", [&] {
    return std::string(ring ? "at or above" : "below") + " the crossover of " +
           std::to_string(crossover) + " B at " + std::to_string(s.ranks) + " ranks (cost model: " +
           (s.host && !s.nested ? "rank 0's constants; this rank's are " : "") +
           tuning.cost_source + ")";
  });
}

Choice all_reduce_by_default(const CallSituation& s, const Tuning& tuning) {
  if (s.route != Path::hierarchical || s.nested) {
    return shm_else(kAllReduce, s, [&] { return network_all_reduce(s, tuning); });
  }
  const SameHost& host = *s.host;
  std::size_t per_host = 0;
  for (const auto& group : host.groups()) per_host = std::max(per_host, group.size());
  const bool rails = every_host_alike(host);
  const HierarchyPrediction model = predict_hierarchy(
      host.network_cost(), host.shm_cost(), s.ranks, static_cast<int>(host.groups().size()),
      static_cast<int>(per_host), rails, static_cast<double>(s.bytes));
  auto predicted = [&] {
    return "(cost model, rank 0's constants: hierarchical " +
           std::to_string(model.hierarchical * 1e6) + " us, flat " +
           std::to_string(model.flat * 1e6) + " us)";
  };
  if (model.hierarchical > model.flat) {
    Choice flat = network_all_reduce(s, tuning);
    if (!flat.why.empty()) flat.why = "flat over every rank " + predicted() + ", " + flat.why;
    return flat;
  }
  return pick(kAllReduce, rails ? "hierarchical_rails" : "hierarchical_leaders", [&] {
    return "over " + std::to_string(host.groups().size()) + " hosts" +
           (rails ? ", " + std::to_string(per_host) + " ranks per host each reducing a block"
                  : ", one leader per host (hosts differ in ranks)") +
           " " + predicted();
  });
}

// Measured on the development machine (docs/BENCHMARKS.md, "all_gather:
// recursive doubling"): at power-of-two sizes up to this much gathered
// output, log2(n) exchanges of growing groups beat one step with n - 1 peers.
constexpr std::size_t kRecursiveDoublingOutputBytes = std::size_t{1} << 20;

Choice all_gather_by_default(const CallSituation& s, const Tuning&) {
  return shm_else(kAllGather, s, [&] {
    const std::size_t output = s.bytes * static_cast<std::size_t>(s.ranks);
    if (s.ranks > 2 && power_of_two(s).empty() && output <= kRecursiveDoublingOutputBytes) {
      return pick(kAllGather, "recursive_doubling", [&] {
        return "a power-of-two group, output up to " + format_bytes(kRecursiveDoublingOutputBytes);
      });
    }
    const std::size_t threshold = all_gather_ring_threshold(s.ranks);
    if (s.bytes < threshold && up_to_a_step_of_ranks(s).empty()) {
      return pick(kAllGather, "direct", [&] {
        return "blocks below the ring's threshold of " + format_bytes(threshold);
      });
    }
    return pick(kAllGather, "ring", [&] {
      return "blocks of " + format_bytes(threshold) + " or more, or too many ranks for one step";
    });
  });
}

// Per block: below this, all_to_all sends to every peer in one step.
constexpr std::size_t kPairwiseBlockBytes = std::size_t{64} << 10;

Choice all_to_all_by_default(const CallSituation& s, const Tuning&) {
  return shm_else(kAllToAll, s, [&] {
    if (s.bytes < kPairwiseBlockBytes && one_step_to_every_peer(s).empty()) {
      return pick(kAllToAll, "direct", [&] {
        return "one step to every peer (blocks under " + format_bytes(kPairwiseBlockBytes) + ")";
      });
    }
    return pick(kAllToAll, "pairwise", [] { return std::string("n - 1 pairwise steps"); });
  });
}

Choice barrier_by_default(const CallSituation& s, const Tuning&) {
  if (s.route == Path::hierarchical && !s.nested) {
    return pick(kBarrier, "hierarchical",
                [] { return std::string("inside each host, among the leaders, inside again"); });
  }
  return shm_else(kBarrier, s, [&] {
    return pick(kBarrier, "dissemination", [] { return std::string("the only network one"); });
  });
}

Choice scatter_by_default(const CallSituation& s, const Tuning&) {
  if (fits_call_lines(s).empty()) {
    return pick(kScatter, "shared_memory", [&] { return shm_reason(s); });
  }
  return pick(kScatter, "direct", [&] {
    return s.route == Path::shared_memory ? fits_call_lines(s) : std::string("over the network");
  });
}

// The collectives with one network algorithm: shared memory when the whole
// group shares it, else that algorithm.
template <const auto& kTable>
Choice network_or_shm(const CallSituation& s, const Tuning&) {
  return shm_else(kTable, s, [&] {
    return pick(kTable, kTable[0].name, [] { return std::string("the only network one"); });
  });
}

const CollectiveTable kTables[] = {
    {CollectiveKind::all_reduce, kAllReduce, all_reduce_by_default},
    {CollectiveKind::all_gather, kAllGather, all_gather_by_default},
    {CollectiveKind::reduce_scatter, kReduceScatter, network_or_shm<kReduceScatter>},
    {CollectiveKind::broadcast, kBroadcast, network_or_shm<kBroadcast>},
    {CollectiveKind::barrier, kBarrier, barrier_by_default},
    {CollectiveKind::all_to_all, kAllToAll, all_to_all_by_default},
    {CollectiveKind::all_gather_v, kAllGatherV, network_or_shm<kAllGatherV>},
    {CollectiveKind::all_to_all_v, kAllToAllV, network_or_shm<kAllToAllV>},
    {CollectiveKind::reduce, kReduce, network_or_shm<kReduce>},
    {CollectiveKind::gather, kGather, network_or_shm<kGather>},
    {CollectiveKind::scatter, kScatter, scatter_by_default},
};

}  // namespace

std::string_view name_of(Path path) {
  switch (path) {
    case Path::network:
      return "network";
    case Path::shared_memory:
      return "shared memory";
    case Path::hierarchical:
      return "hierarchical";
  }
  return "?";
}

std::span<const CollectiveTable> all_tables() { return kTables; }

const CollectiveTable& table_of(CollectiveKind kind) {
  return kTables[static_cast<std::size_t>(kind) - 1];
}

const Algorithm* find_algorithm(CollectiveKind kind, std::string_view name) {
  for (const Algorithm& algorithm : table_of(kind).algorithms) {
    if (algorithm.name == name) return &algorithm;
  }
  return nullptr;
}

namespace {

// Whether `rule` speaks for `s`. RLX_TUNE's ranges are a whole call's bytes:
// a step of a hierarchical collective (whose rails' blocks may differ by an
// element) keeps its default. The older all-reduce setting applies where
// it always did: wherever the network all-reduce runs.
bool applies(const ForcedAlgorithm& rule, const CallSituation& s) {
  if (rule.collective != s.call.kind || s.bytes < rule.from_bytes || s.bytes >= rule.to_bytes) {
    return false;
  }
  return rule.strict ? !s.nested : s.nested || s.route == Path::network;
}

}  // namespace

Choice choose_algorithm(const CallSituation& s, const Tuning& tuning) {
  for (const ForcedAlgorithm& rule : tuning.forced) {
    if (!applies(rule, s)) continue;
    const Algorithm* forced = find_algorithm(rule.collective, rule.algorithm);
    const std::string why_not = forced->cannot_run(s);
    if (why_not.empty()) {
      return {forced, log_enabled(LogLevel::debug) ? "forced by " + rule.rule : std::string()};
    }
    if (!rule.strict) break;
    throw CollectiveError(
        ErrorKind::invalid_argument,
        {.rank = s.rank, .world_size = s.ranks, .operation = s.call.describe()},
        rule.rule + " forces " + std::string(forced->name) + ", which cannot run here: " + why_not,
        "narrow the rule's size range or name another algorithm; without the rule, RLX_LOG=debug "
        "shows what rlx would choose");
  }
  return table_of(s.call.kind).by_default(s, tuning);
}

void run_chosen(AlgorithmContext& context, const CallSituation& situation,
                const CollectiveArgs& args) {
  choose_algorithm(situation, context.tuning).algorithm->run(context, situation.call, args);
}

bool ChoiceLog::first(CollectiveKind kind, std::size_t bytes) {
  const auto size_class = std::min<unsigned>(static_cast<unsigned>(std::bit_width(bytes)), 63);
  const std::uint64_t bit = std::uint64_t{1} << size_class;
  std::atomic<std::uint64_t>& seen = seen_[static_cast<std::size_t>(kind) % seen_.size()];
  return (seen.fetch_or(bit, std::memory_order_relaxed) & bit) == 0;
}

void log_choice(ChoiceLog& log, const CollectiveCall& call, std::size_t bytes,
                std::string_view algorithm, std::string_view path, std::string_view why) {
  if (!log_enabled(LogLevel::debug) || !log.first(call.kind, bytes)) return;
  rlx::log(LogLevel::debug, call.describe() + ": " + std::string(algorithm) + " (" +
                                std::string(path) + "), " + std::string(why));
}

}  // namespace rlx
