// One table of algorithms per collective: every algorithm rlx runs for it,
// where it can run, and how the default is chosen; the one place that picks
// (as UCC keeps a table per collective with a TUNE string to override it).
//
// A collective call is first described by its CallSituation (the same on
// every rank of the call). choose_algorithm() takes RLX_TUNE's rule covering
// the call's size when there is one (a forced algorithm that cannot run in
// that situation is an invalid_argument error, never a silent fallback),
// else the collective's default: the cost model's crossovers for the
// all-reduce, the measured thresholds of docs/BENCHMARKS.md for the others.
// RLX_LOG=debug prints each choice with its reason once per collective and
// size class (ChoiceLog).
//
// Adding an algorithm: its file, a row in its collective's table in
// algorithm_table.cc, and a conformance run that forces it (CONTRIBUTING.md).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "rlx/collectives/links.h"
#include "rlx/collectives/tuning.h"
#include "rlx/transport/collective_call.h"

namespace rlx {

class SameHost;

// Which way an algorithm moves data, and which ways a group can: over the
// network only (TCP or verbs, possibly to peers of the same host), through
// shared memory only (every rank on one host), or both (a job spanning hosts
// whose ranks share memory with those of their host).
enum class Path : std::uint8_t { network, shared_memory, hierarchical };
std::string_view name_of(Path path);

// What a choice may depend on: the same on every rank of one call.
struct CallSituation {
  const CollectiveCall& call;
  int rank = 0;
  int ranks = 1;
  // The call's count in bytes: a rank's block (all_gather, gather: its
  // input; reduce_scatter, scatter: its output; all_to_all: one block), the
  // buffer (all_reduce, broadcast, reduce), the gathered total
  // (all_gather_v), 0 (all_to_all_v, barrier). RLX_TUNE's ranges are in it.
  std::size_t bytes = 0;
  Path route = Path::network;  // the ways this group can go
  SameHost* host = nullptr;    // the same-host path, when the backend has one
  // A step of a hierarchical algorithm: only network algorithms apply, and
  // rules forcing another kind are for the whole call, not this step.
  bool nested = false;
};

// What an algorithm works on: in-place collectives (all_reduce, broadcast,
// reduce) use `output` alone.
struct CollectiveArgs {
  ConstElementSpan input{};
  ElementSpan output{};
  std::span<const std::size_t> counts{};       // all_gather_v; all_to_all_v's send counts
  std::span<const std::size_t> recv_counts{};  // all_to_all_v
};

struct AlgorithmContext {
  Links& links;
  SameHost* host;  // null without a same-host path
  const Tuning& tuning;
};

struct Algorithm {
  std::string_view name;
  Path path;
  // Where it can run, in words (docs/ARCHITECTURE.md's table, the errors).
  std::string_view applies;
  // Empty when it can run in `situation`, else why not.
  std::string (*cannot_run)(const CallSituation& situation);
  void (*run)(AlgorithmContext& context, const CollectiveCall& call, const CollectiveArgs& args);
};

struct Choice {
  const Algorithm* algorithm = nullptr;
  std::string why;  // filled only when the debug log is on
};

struct CollectiveTable {
  CollectiveKind collective;
  std::span<const Algorithm> algorithms;
  // The choice without RLX_TUNE; `why` only when the debug log is on.
  Choice (*by_default)(const CallSituation& situation, const Tuning& tuning);
};

// The table of `kind`, and every table in CollectiveKind's order.
const CollectiveTable& table_of(CollectiveKind kind);
std::span<const CollectiveTable> all_tables();
// The row of `kind` named `name`, or null.
const Algorithm* find_algorithm(CollectiveKind kind, std::string_view name);

// The algorithm for `situation`: RLX_TUNE's (or RLX_ALL_REDUCE_ALGORITHM's)
// rule covering its size, else the table's default. Throws CollectiveError
// (invalid_argument) when a rule of RLX_TUNE forces an algorithm that
// cannot run in `situation`.
Choice choose_algorithm(const CallSituation& situation, const Tuning& tuning);

// Chooses as choose_algorithm and runs the choice.
void run_chosen(AlgorithmContext& context, const CallSituation& situation,
                const CollectiveArgs& args);

// Which (collective, size class) choices were already printed: a size class
// is a power of two of bytes, so a training loop's calls print once.
class ChoiceLog {
 public:
  // True the first time for `kind` and the size class of `bytes`.
  bool first(CollectiveKind kind, std::size_t bytes);

 private:
  std::array<std::atomic<std::uint64_t>, 16> seen_{};
};

// "all_gather of 256 x f32 (1 KiB), collective #3: ring (network), <why>",
// printed at debug level the first time for its collective and size class.
void log_choice(ChoiceLog& log, const CollectiveCall& call, std::size_t bytes,
                std::string_view algorithm, std::string_view path, std::string_view why);

}  // namespace rlx
