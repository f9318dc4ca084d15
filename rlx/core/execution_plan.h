// A compiled graph's schedule, replayed run after run into one arena.
// Internal to core: CompiledGraph (rlx/core/compiled_graph.h) owns one.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "rlx/core/array.h"
#include "rlx/core/array_node.h"

namespace rlx::detail {

class ExecutionPlan {
 public:
  // One step: a primitive computing one array, or one eval_batch() computing
  // several (a fused all-reduce).
  struct Step {
    std::vector<Array> outputs;
    std::vector<Primitive::BatchItem> items;  // batch steps: one per output
    // A collective (a batched primitive): runs on the plan's background
    // thread while the local steps after it that do not read it run here.
    bool background = false;
    // The background step in flight must finish before this one starts:
    // it reads its outputs, communicates itself, or is not local.
    bool joins = false;
    const Primitive& primitive() const;
  };

  // Plans the steps eval() would take for `roots`, which are built on arrays
  // the caller gives data before each run (a graph's inputs and parameters).
  // Nothing is computed yet.
  ExecutionPlan(std::span<const Array> roots, std::size_t batch_cap);
  ExecutionPlan(const ExecutionPlan&) = delete;
  ExecutionPlan& operator=(const ExecutionPlan&) = delete;

  // Computes every root. The first run takes buffers from the allocator and
  // notes which outputs share an input's data (reshape does), computing
  // every step on this thread; then the arena is laid out by the buffers'
  // lifetimes, and every later run computes into it without allocating,
  // collectives on the background thread overlapping the local steps that
  // do not need them. A primitive's exception propagates (after the step in
  // flight finished); the next run starts over.
  void run();

  std::span<const Array> roots() const { return roots_; }
  std::span<const Step> steps() const { return steps_; }
  bool laid_out() const { return arena_ != nullptr; }
  std::size_t arena_bytes() const { return arena_bytes_; }
  // True when `buffer` is (a view of) this plan's arena.
  bool in_arena(const Buffer& buffer) const;

 private:
  // Where a step's output lives in the runs after the first.
  struct Placement {
    std::size_t offset = 0;         // in the arena
    const Array* shares = nullptr;  // the input whose data it takes, if any
  };

  friend class BackgroundSteps;

  void run_planned();
  void run_step(std::size_t index);
  void note_sharing(std::size_t index);
  void mark_joins();
  void note_last_reads();
  bool placed_as_planned(std::size_t index, std::size_t k) const;
  void lay_out();
  [[noreturn]] void changed_sharing(const Array& output) const;

  std::vector<Array> roots_;
  std::vector<Step> steps_;
  std::vector<std::vector<Placement>> placements_;  // per step, per output
  std::vector<std::size_t> joined_before_;  // per background step: the step that waits for it
  std::vector<std::vector<ArrayNode*>> released_after_;  // first run: per step
  Buffer arena_;
  std::size_t arena_bytes_ = 0;
};

}  // namespace rlx::detail
