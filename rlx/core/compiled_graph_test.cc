// The compiled path: one plan, an arena reused across runs, carried
// parameters, fused batches laid out back to back, and a run after a failed one.
#include "rlx/core/compiled_graph.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <gtest/gtest.h>

#include "rlx/core/custom.h"
#include "rlx/core/eval.h"
#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"
#include "rlx/core/registry.h"

namespace rlx {
namespace {

using testing::expect_error;

std::vector<float> iota(std::size_t n, float scale) {
  std::vector<float> values(n);
  for (std::size_t i = 0; i < n; ++i) values[i] = scale * static_cast<float>(i % 7) - 1.0f;
  return values;
}

// Every kind of kernel: matmul, a broadcast add, unary ops, a reshape (which
// shares its input's data), a transpose (a strided copy), and reductions
// over the last and over a leading axis.
struct MixedGraph {
  Graph graph;
  Node x = graph.input("x", {8, 16});
  Node w = graph.param("w", {16, 12});
  Node b = graph.param("b", {12});
  Node h = graph.gelu(graph.add(graph.matmul(x, w), b));
  Node r = graph.reshape(h, {4, 24});
  Node t = graph.transpose(graph.tanh(r));
  Node rows = graph.sum(t, {1});
  Node cols = graph.mean(graph.exp(r), {0});
  MixedGraph() { graph.set_outputs({t, rows, cols, r}); }

  static std::vector<Array> eager(const std::vector<float>& xv, const std::vector<float>& wv,
                                  const std::vector<float>& bv) {
    const Array hx =
        gelu(matmul(Array::from(xv, {8, 16}), Array::from(wv, {16, 12})) + Array::from(bv, {12}));
    const Array rx = reshape(hx, {4, 24});
    const Array tx = transpose(tanh(rx));
    std::vector<Array> out{tx, sum(tx, {1}), mean(exp(rx), {0}), rx};
    eval(out);
    return out;
  }
};

TEST(PlannedRun, MatchesEagerEvaluationBitForBitRunAfterRun) {
  MixedGraph mixed;
  CompiledGraph compiled = compile(mixed.graph);
  const std::vector<float> wv = iota(16 * 12, 0.05f);
  const std::vector<float> bv = iota(12, 0.1f);
  compiled.set_param("w", wv);
  compiled.set_param("b", bv);
  EXPECT_EQ(compiled.arena_bytes(), 0u);  // laid out by the first run
  for (int run = 0; run < 4; ++run) {
    const std::vector<float> xv = iota(8 * 16, 0.01f * static_cast<float>(run + 1));
    const Value inputs[] = {xv};
    const std::span<const Array> out = compiled.run_slots(inputs);
    const std::vector<Array> expected = MixedGraph::eager(xv, wv, bv);
    ASSERT_EQ(out.size(), expected.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(out[i].shape(), expected[i].shape());
      EXPECT_EQ(out[i].to_vector<float>(), expected[i].to_vector<float>())
          << "output " << i << ", run " << run;
    }
    EXPECT_GT(compiled.arena_bytes(), 0u);
  }
}

TEST(PlannedRun, IntermediatesShareTheArenaByLifetime) {
  Graph graph;
  Node x = graph.input("x", {256});
  Node y = x;
  for (int i = 0; i < 32; ++i) y = graph.add(graph.mul(y, y), x);  // 64 intermediates
  graph.set_outputs({y});
  CompiledGraph compiled = compile(graph);
  EXPECT_EQ(compiled.steps(), 64u);
  const std::vector<float> xv(256, 0.5f);
  std::vector<float> first = compiled.run({{"x", xv}})[0].to_vector<float>();
  // Two or three 1 KiB buffers are alive at any time, not 64.
  EXPECT_LE(compiled.arena_bytes(), 3u * 1024u);
  EXPECT_EQ(compiled.run({{"x", xv}})[0].to_vector<float>(), first);
  Array eager = Array::from(xv, {256});
  Array xa = eager;
  for (int i = 0; i < 32; ++i) eager = eager * eager + xa;
  EXPECT_EQ(eager.to_vector<float>(), first);
}

TEST(PlannedRun, ViewsLastUntilTheNextRunAndRunReturnsCopies) {
  Graph graph;
  Node x = graph.input("x", {4});
  graph.set_outputs({graph.mul(x, x)});
  CompiledGraph compiled = compile(graph);
  const std::vector<float> two(4, 2.0f), three(4, 3.0f);
  const std::vector<Array> kept = compiled.run({{"x", two}});
  const Value first[] = {two};
  const Array view = compiled.run_slots(first)[0];
  EXPECT_EQ(view.to_vector<float>(), std::vector<float>(4, 4.0f));
  const Value second[] = {three};
  compiled.run_slots(second);
  EXPECT_EQ(view.to_vector<float>(), std::vector<float>(4, 9.0f));  // the arena moved on
  EXPECT_EQ(kept[0].to_vector<float>(), std::vector<float>(4, 4.0f));
  expect_error<Error>([&] { compiled.run_slots({}); },
                      "run_slots: got 0 inputs where the graph takes 1");
  const Value wrong[] = {std::vector<float>(3)};
  expect_error<Error>([&] { compiled.run_slots(wrong); }, "run: input 'x': got 3 f32 values");
}

TEST(PlannedRun, ArraysAreBoundWhereTheyAreAndHostValuesCopiedOnce) {
  Graph graph;
  Node x = graph.input("x", {3});
  graph.set_outputs({graph.reshape(x, {3, 1})});  // the output is x's own data
  CompiledGraph compiled = compile(graph);
  const Array bound = Array::from(std::vector<float>{1, 2, 3}, {3});
  const Value inputs[] = {bound};
  const Array out = compiled.run_slots(inputs)[0];
  EXPECT_EQ(out.raw_data(), bound.raw_data());
  std::vector<float> host{4, 5, 6};
  const Value copied[] = {host};
  const Array view = compiled.run_slots(copied)[0];
  host[0] = 99;  // the graph has its own copy
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{4, 5, 6}));
}

TEST(PlannedRun, CarriedParametersFeedTheNextRun) {
  // One SGD step on w for the loss sum(x * w): w -= lr * x.
  Graph graph;
  Node x = graph.input("x", {3});
  Node w = graph.param("w", {3});
  Node lr = graph.constant(Array::from(std::vector<float>{0.5f}, {1}));
  Node next = graph.sub(w, graph.mul(lr, x));
  graph.set_outputs({graph.sum(graph.mul(x, w), {0}), next});
  CompiledGraph compiled = compile(graph);
  compiled.set_param("w", std::vector<float>{1, 1, 1});
  compiled.carry(1, "w");
  const std::vector<float> xv{2, 4, 8};
  for (int step = 0; step < 3; ++step) compiled.run({{"x", xv}});
  EXPECT_EQ(compiled.param("w").to_vector<float>(), (std::vector<float>{-2, -5, -11}));
  expect_error<Error>([&] { compiled.carry(0, "w"); }, "carry: output 0 is () f32");
  expect_error<Error>([&] { compiled.carry(5, "w"); }, "carry: output 5 of 2");
}

TEST(PlannedRun, AFailedRunLeavesTheNextOneWhole) {
  static std::atomic<bool> fail{false};
  register_array_kernel("compiled_test.maybe_fail", [](std::span<const Array> in,
                                                       std::string_view) {
    return make_custom("compiled_test.maybe_fail", in[0].shape(), in[0].dtype(), {in[0]},
                       [](std::span<const Array> inputs, Array& out) {
                         if (fail.load()) throw std::runtime_error("asked to fail");
                         std::memcpy(out.raw_mutable_data(), inputs[0].raw_data(), out.nbytes());
                       });
  });
  register_op_extension(
      {.name = "compiled_test.maybe_fail",
       .num_inputs = 1,
       .infer_shape = [](std::span<const Shape> in, std::string_view) { return in[0]; }});
  Graph graph;
  Node x = graph.input("x", {2});
  // The failing op comes after a step that wrote the arena.
  graph.set_outputs(
      {graph.add(graph.custom_op("compiled_test.maybe_fail", "", {graph.mul(x, x)}), x)});
  CompiledGraph compiled = compile(graph);
  for (bool first_fails : {true, false}) {
    fail = first_fails;
    if (first_fails) {
      expect_error<std::runtime_error>(
          [&] {
            compiled.run({{"x", std::vector<float>{1, 2}}});
          },
          "asked to fail");
    }
    fail = false;
    EXPECT_EQ(compiled.run({{"x", std::vector<float>{1, 2}}})[0].to_vector<float>(),
              (std::vector<float>{2, 6}));
    fail = true;
    expect_error<std::runtime_error>(
        [&] {
          compiled.run({{"x", std::vector<float>{1, 2}}});
        },
        "asked to fail");
    fail = false;
    EXPECT_EQ(compiled.run({{"x", std::vector<float>{3, 4}}})[0].to_vector<float>(),
              (std::vector<float>{12, 20}));
  }
}

// A batched op (the way the collectives fuse all-reduces): independent
// arrays of one key are one step, and their outputs lie back to back.
TEST(PlannedRun, FusedOutputsAreOneStepLaidOutBackToBack) {
  static std::atomic<int> calls{0};
  static std::atomic<bool> contiguous{false};
  register_array_kernel("compiled_test.double", [](std::span<const Array> in, std::string_view) {
    return make_batched_custom(
        "compiled_test.double", "compiled_test.double", in[0].shape(), in[0].dtype(), {in[0]},
        [](std::span<const Primitive::BatchItem> items) {
          ++calls;
          bool back_to_back = true;
          auto* next = static_cast<std::byte*>(items[0].output->raw_mutable_data());
          for (const auto& item : items) {
            back_to_back = back_to_back && item.output->raw_mutable_data() == next;
            next += item.output->nbytes();
            const float* x = item.inputs[0].data<float>().data();
            float* y = item.output->mutable_data<float>().data();
            for (std::int64_t i = 0; i < item.output->size(); ++i) y[i] = 2 * x[i];
          }
          contiguous = back_to_back;
        });
  });
  register_op_extension(
      {.name = "compiled_test.double",
       .num_inputs = 1,
       .infer_shape = [](std::span<const Shape> in, std::string_view) { return in[0]; }});
  Graph graph;
  Node a = graph.input("a", {3});
  Node b = graph.input("b", {5});
  Node da = graph.custom_op("compiled_test.double", "", {graph.exp(a)});
  Node db = graph.custom_op("compiled_test.double", "", {graph.exp(b)});
  graph.set_outputs({da, db});
  CompiledGraph compiled = compile(graph);
  EXPECT_EQ(compiled.steps(), 3u);  // two exps, one fused call
  for (int run = 0; run < 3; ++run) {
    calls = 0;
    const auto out =
        compiled.run({{"a", std::vector<float>(3, 0)}, {"b", std::vector<float>(5, 0)}});
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(3, 2.0f));
    EXPECT_EQ(out[1].to_vector<float>(), std::vector<float>(5, 2.0f));
    if (run > 0) {
      EXPECT_TRUE(contiguous.load()) << "run " << run;
    }
  }
}

TEST(PlannedRun, ALazyConstantIsEvaluatedOnceAndLeftAlone) {
  const Array lazy = Array::from(std::vector<float>{1, 2, 3}, {3}) * 2.0;  // pending
  Graph graph;
  Node x = graph.input("x", {3});
  graph.set_outputs({graph.mul(graph.add(x, graph.constant(lazy)), x)});
  CompiledGraph compiled = compile(graph);
  EXPECT_TRUE(lazy.is_evaluated());
  for (float v : {1.0f, 2.0f, 3.0f}) {
    const std::vector<float> xv(3, v);
    EXPECT_EQ(compiled.run({{"x", xv}})[0].to_vector<float>(),
              (std::vector<float>{(2 + v) * v, (4 + v) * v, (6 + v) * v}));
  }
  EXPECT_EQ(lazy.to_vector<float>(), (std::vector<float>{2, 4, 6}));
}

TEST(PlannedRun, CarriedParametersMayBeOutputsAndTradeValues) {
  Graph graph;
  Node a = graph.param("a", {2});
  Node b = graph.param("b", {2});
  Node x = graph.input("x", {2});
  graph.set_outputs({graph.add(b, x), graph.add(a, x), a});
  CompiledGraph compiled = compile(graph);
  compiled.set_param("a", std::vector<float>{1, 1});
  compiled.set_param("b", std::vector<float>{2, 2});
  compiled.carry(0, "a");  // a <- b + x
  compiled.carry(1, "b");  // b <- a + x
  expect_error<Error>([&] { compiled.carry(1, "b"); }, "carry: parameter 'b' is carried already");
  const std::vector<float> zero(2, 0.0f);
  for (int run = 0; run < 4; ++run) {
    const std::vector<Array> out = compiled.run({{"x", zero}});
    // Output 2 is `a` as this run read it, before the carry.
    EXPECT_EQ(out[2].to_vector<float>(), std::vector<float>(2, run % 2 == 0 ? 1.0f : 2.0f));
    EXPECT_EQ(compiled.param("a").to_vector<float>(),
              std::vector<float>(2, run % 2 == 0 ? 2.0f : 1.0f));
  }
  const Value slots[] = {zero};
  const std::span<const Array> views = compiled.run_slots(slots);
  EXPECT_EQ(views[2].to_vector<float>(), std::vector<float>(2, 1.0f));  // the value the run used
}

TEST(PlannedRun, AnOutputFedBackAsTheNextInputIsCopied) {
  // y lands where a dead intermediate lived; fed back as x, binding it in
  // place would let the next run overwrite its own input.
  Graph graph;
  Node x = graph.input("x", {64});
  Node a = graph.exp(graph.mul(x, graph.constant(Array::from(std::vector<float>{0.01f}, {1}))));
  Node b = graph.mul(a, a);
  graph.set_outputs({graph.add(b, x)});
  CompiledGraph compiled = compile(graph);
  std::vector<float> start(64);
  for (std::size_t i = 0; i < start.size(); ++i) start[i] = 0.01f * static_cast<float>(i);
  const Value first[] = {start};
  Array fed = compiled.run_slots(first)[0];
  Array eager = Array::from(start, {64});
  eager = exp(eager * 0.01) * exp(eager * 0.01) + eager;
  for (int run = 0; run < 5; ++run) {
    const Value inputs[] = {fed};
    fed = compiled.run_slots(inputs)[0];
    eager = exp(eager * 0.01) * exp(eager * 0.01) + eager;
    EXPECT_EQ(fed.to_vector<float>(), eager.to_vector<float>()) << "run " << run;
  }
}

TEST(PlannedRun, AMovedGraphRunsAsBefore) {
  MixedGraph mixed;
  CompiledGraph first = compile(mixed.graph);
  first.set_param("w", iota(16 * 12, 0.05f));
  first.set_param("b", iota(12, 0.1f));
  const std::vector<float> xv = iota(8 * 16, 0.02f);
  const std::vector<float> before = first.run({{"x", xv}})[1].to_vector<float>();
  CompiledGraph moved = std::move(first);
  EXPECT_EQ(moved.run({{"x", xv}})[1].to_vector<float>(), before);
  CompiledGraph assigned = compile(Graph(mixed.graph));
  assigned = std::move(moved);
  EXPECT_EQ(assigned.run({{"x", xv}})[1].to_vector<float>(), before);
}

TEST(PlannedRun, AnInputPassedThroughAndFedBackKeepsItsValueWhileBinding) {
  Graph graph;
  Node x = graph.input("x", {2});
  Node y = graph.input("y", {2});
  graph.set_outputs({graph.reshape(x, {2}), graph.add(x, y)});
  CompiledGraph compiled = compile(graph);
  const std::vector<float> ones(2, 1.0f), twos(2, 2.0f), tens(2, 10.0f);
  const Value first[] = {ones, twos};
  const Array passed = compiled.run_slots(first)[0];  // x's own storage
  const Value second[] = {tens, passed};
  EXPECT_EQ(compiled.run_slots(second)[1].to_vector<float>(), std::vector<float>(2, 11.0f));
}

TEST(PlannedRun, SettingACarriedParameterLeavesOldHandlesAlone) {
  Graph graph;
  Node w = graph.param("w", {2});
  graph.set_outputs({graph.mul(w, graph.constant(Array::from(std::vector<float>{2}, {1})))});
  CompiledGraph compiled = compile(graph);
  compiled.set_param("w", std::vector<float>{1, 1});
  compiled.carry(0, "w");
  compiled.run({});
  const Array held = compiled.param("w");
  EXPECT_EQ(held.to_vector<float>(), std::vector<float>(2, 2.0f));
  compiled.set_param("w", std::vector<float>{5, 5});
  EXPECT_EQ(held.to_vector<float>(), std::vector<float>(2, 2.0f));
  compiled.set_param("w", held);  // a handle of this graph's own is copied, not bound
  compiled.run({});
  compiled.run({});
  EXPECT_EQ(compiled.param("w").to_vector<float>(), std::vector<float>(2, 8.0f));
  EXPECT_EQ(held.to_vector<float>(), std::vector<float>(2, 2.0f));
}

// A collective-like batched step runs in the background while later local
// steps that do not read it run here; a step that is not local waits for
// it first; an error in the background reaches run().
struct OverlapOps {
  static inline std::atomic<bool> local_ran{false};  // set under `mutex`, announced on `ran`
  static inline std::mutex mutex;
  static inline std::condition_variable ran;
  static inline std::atomic<bool> background_done{false};
  static inline std::atomic<bool> background_saw_local{false};
  static inline std::atomic<bool> fail{false};
  static inline std::atomic<bool> expect_overlap{false};

  static void register_ops() {
    auto same_shape = [](std::span<const Shape> in, std::string_view) { return in[0]; };
    register_op_extension({.name = "overlap_test.collective", .infer_shape = same_shape});
    register_op_extension({.name = "overlap_test.local", .infer_shape = same_shape});
    register_op_extension({.name = "overlap_test.not_local", .infer_shape = same_shape});
    register_array_kernel(
        "overlap_test.collective", [](std::span<const Array> in, std::string_view) {
          return make_batched_custom(
              "overlap_test.collective", "overlap_test", in[0].shape(), in[0].dtype(), {in[0]},
              [](std::span<const Primitive::BatchItem> items) {
                // Waits up to 2 s for the local step after it: it only comes
                // while this one is in flight if the two overlap.
                if (expect_overlap.load()) {
                  std::unique_lock lock(mutex);
                  ran.wait_for(lock, std::chrono::seconds(2), [] { return local_ran.load(); });
                }
                background_saw_local = local_ran.load();
                for (const auto& item : items) {
                  std::memcpy(item.output->raw_mutable_data(), item.inputs[0].raw_data(),
                              item.output->nbytes());
                }
                background_done = true;
                if (fail.load()) throw std::runtime_error("background step failed");
              });
        });
    register_array_kernel("overlap_test.local", [](std::span<const Array> in, std::string_view) {
      return make_local_custom("overlap_test.local", in[0].shape(), in[0].dtype(), {in[0]},
                               [](std::span<const Array> inputs, Array& out) {
                                 {
                                   std::lock_guard lock(mutex);
                                   local_ran = true;
                                 }
                                 ran.notify_all();
                                 std::memcpy(out.raw_mutable_data(), inputs[0].raw_data(),
                                             out.nbytes());
                               });
    });
    register_array_kernel("overlap_test.not_local", [](std::span<const Array> in,
                                                       std::string_view) {
      return make_custom("overlap_test.not_local", in[0].shape(), in[0].dtype(), {in[0]},
                         [](std::span<const Array> inputs, Array& out) {
                           if (!background_done.load()) throw std::runtime_error("ran too early");
                           std::memcpy(out.raw_mutable_data(), inputs[0].raw_data(), out.nbytes());
                         });
    });
  }
};

TEST(PlannedRun, ACollectiveStepOverlapsTheLocalStepsAfterIt) {
  OverlapOps::register_ops();
  Graph graph;
  const Node a = graph.input("a", {4});
  const Node b = graph.input("b", {4});
  const Node reduced = graph.custom_op("overlap_test.collective", "", {graph.exp(a)});
  const Node local = graph.custom_op("overlap_test.local", "", {graph.exp(b)});
  const Node waits = graph.custom_op("overlap_test.not_local", "", {local});
  graph.set_outputs({graph.add(reduced, waits)});
  set_batch_bytes_cap(8);  // the collective's bucket is full at once: it runs before `local`
  CompiledGraph compiled = compile(graph);
  set_batch_bytes_cap(std::size_t{25} << 20);
  const std::vector<float> zeros(4, 0.0f);
  for (int run = 0; run < 3; ++run) {
    OverlapOps::expect_overlap = run > 0;  // the first run computes every step in turn
    OverlapOps::local_ran = false;
    OverlapOps::background_done = false;
    const auto out = compiled.run({{"a", zeros}, {"b", zeros}});
    EXPECT_EQ(out[0].to_vector<float>(), std::vector<float>(4, 2.0f));
    if (run > 0) {
      EXPECT_TRUE(OverlapOps::background_saw_local.load()) << "run " << run;
    }
  }
  OverlapOps::fail = true;
  OverlapOps::local_ran = false;
  OverlapOps::background_done = false;
  expect_error<std::runtime_error>(
      [&] {
        compiled.run({{"a", zeros}, {"b", zeros}});
      },
      "background step failed");
  OverlapOps::fail = false;
  OverlapOps::local_ran = false;
  OverlapOps::background_done = false;
  EXPECT_EQ(compiled.run({{"a", zeros}, {"b", zeros}})[0].to_vector<float>(),
            std::vector<float>(4, 2.0f));
}

}  // namespace
}  // namespace rlx
