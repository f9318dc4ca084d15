// Collectives inside lazy-array graphs, run by every rank of a real job
// (rlxrun -n N, or mpirun): each rank holds a slice of a tensor-parallel
// matmul, the in-graph all-reduce completes it, and every rank checks the
// result against the single-process computation of the whole matrix.
#include <cmath>

#include <gtest/gtest.h>

#include "rlx/rlx.h"

namespace rlx {
namespace {

std::shared_ptr<Transport> group() {
  static std::shared_ptr<Transport> instance = init();
  return instance;
}

constexpr std::int64_t kRows = 7, kInner = 24, kCols = 5;  // kInner divides by 1, 2, 3, 4, 6, 8

Array full_x() { return random_normal({kRows, kInner}, 0.0, 1.0, /*seed=*/11); }
Array full_w() { return random_normal({kInner, kCols}, 0.0, 1.0, /*seed=*/12); }

// This rank's slice of the inner dimension.
std::pair<std::int64_t, std::int64_t> my_inner() {
  const std::int64_t part = kInner / group()->world_size();
  return {group()->rank() * part, (group()->rank() + 1) * part};
}

void expect_close(const Array& got, const Array& want, double tolerance) {
  ASSERT_EQ(got.shape(), want.shape());
  const auto g = got.to_vector<float>(), w = want.to_vector<float>();
  double worst = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::fabs(double(g[i]) - w[i]));
  EXPECT_LE(worst, tolerance);
}

TEST(ArrayCollectives, BuildingComputesNothingAndEvalReduces) {
  const int n = group()->world_size();
  const Array mine = full({3, 4}, group()->rank() + 1.0);
  const Array total = distributed::all_sum(mine);
  if (n > 1) {
    EXPECT_FALSE(total.is_evaluated());
  } else {
    EXPECT_TRUE(total.is(mine));  // a group of one returns the input itself
  }
  eval(total);
  for (float v : total.to_vector<float>()) EXPECT_EQ(v, n * (n + 1) / 2.0f);
}

TEST(ArrayCollectives, TensorParallelMatmulAllReduceGeluMatchesOneProcess) {
  const auto [begin, end] = my_inner();
  const Array x_part = slice(full_x(), {0, begin}, {kRows, end});
  const Array w_part = slice(full_w(), {begin, 0}, {end, kCols});
  const Array y = gelu(distributed::all_sum(matmul(x_part, w_part)));
  expect_close(y, gelu(matmul(full_x(), full_w())), 1e-5);
}

TEST(ArrayCollectives, ReduceScatterGivesEachRankItsRowsOfTheSum) {
  const int n = group()->world_size();
  const std::int64_t rows_per_rank = 3;
  // Rank r contributes (r + 1) * m where m is the same matrix on every rank.
  const Array m = random_normal({rows_per_rank * n, kCols}, 0.0, 1.0, /*seed=*/13);
  const Array mine = m * (group()->rank() + 1.0);
  const Array part = distributed::reduce_scatter(mine);
  ASSERT_EQ(part.shape(), (Shape{rows_per_rank, kCols}));
  const std::int64_t first = group()->rank() * rows_per_rank;
  const Array want = slice(m, {first, 0}, {first + rows_per_rank, kCols}) * (n * (n + 1) / 2.0);
  expect_close(part, want, 1e-5);
  if (n > 1) {  // every length divides by a group of one
    EXPECT_THROW(distributed::reduce_scatter(full({rows_per_rank * n + 1, 2}, 1.0)), ShapeError);
  }
  EXPECT_THROW(distributed::reduce_scatter(full({}, 1.0)), ShapeError);
}

TEST(ArrayCollectives, ManySmallAllReducesInOneEvalAreFusedWithIdenticalResults) {
  // Small integers: exact in f32 whatever order the reduction takes.
  const int me = group()->rank();
  std::vector<Array> inputs, reduced;
  for (int i = 0; i < 60; ++i) {
    const Shape shape{i % 7 + 1, 3};
    inputs.push_back(i % 3 == 2 ? full(shape, me * 10 + i, Dtype::i32) : full(shape, me - i));
    reduced.push_back(i % 5 == 4 ? distributed::all_reduce(inputs.back(), ReduceOp::max)
                                 : distributed::all_sum(inputs.back()));
  }
  eval(std::span<const Array>(reduced));  // three keys, interleaved: several buckets
  const std::size_t cap = batch_bytes_cap();
  set_batch_bytes_cap(0);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Array alone = i % 5 == 4 ? distributed::all_reduce(inputs[i], ReduceOp::max)
                                   : distributed::all_sum(inputs[i]);
    eval(alone);
    ASSERT_EQ(reduced[i].dtype(), alone.dtype());
    if (alone.dtype() == Dtype::i32) {
      EXPECT_EQ(reduced[i].to_vector<std::int32_t>(), alone.to_vector<std::int32_t>()) << i;
    } else {
      EXPECT_EQ(reduced[i].to_vector<float>(), alone.to_vector<float>()) << i;
    }
  }
  set_batch_bytes_cap(cap);
}

// Overlapping groups A = {0, 1} and B = {1, 2}: rank 1 interleaves both
// groups' all-reduces in one eval, ranks 0 and 2 have one group each. Each
// group's reductions fuse alike on its two ranks (they used to fuse across
// the other group's ops on rank 0 only: a mismatch).
TEST(ArrayCollectives, OverlappingGroupsInOneEvalFuseAlikeOnEveryRank) {
  if (group()->world_size() < 3) GTEST_SKIP() << "needs 3 ranks";
  const int me = group()->rank();
  auto a = group()->split(me <= 1 ? 0 : kNoColor);
  auto b = group()->split(me == 1 || me == 2 ? 0 : kNoColor);
  std::vector<Array> reduced;
  for (int i = 0; i < 8; ++i) {
    const Array x = full({i + 1}, me + i);
    if (a) reduced.push_back(distributed::all_sum(x, a));
    if (b) reduced.push_back(distributed::all_sum(x * 2.0, b));
  }
  eval(std::span<const Array>(reduced));
  std::size_t at = 0;
  for (int i = 0; i < 8; ++i) {
    if (a) {
      EXPECT_EQ(reduced[at++].to_vector<float>()[0], float(0 + 1 + 2 * i)) << i;
    }
    if (b) {
      EXPECT_EQ(reduced[at++].to_vector<float>()[0], float(2 * (1 + 2 + 2 * i))) << i;
    }
  }
}

// Array ops hold their group by id, weakly: once its last handle goes the
// group closes (its transport, with its sockets, threads and segment, is
// destroyed) although ops used it, and an op built for it that runs later
// fails naming it.
TEST(ArrayCollectives, AGroupClosesWhenItsLastHandleGoesAfterArrayOpsUsedIt) {
  const int n = group()->world_size();
  std::weak_ptr<Transport> watched;
  Array late;
  {
    const std::shared_ptr<Transport> sub = group()->split(0);
    const Array reduced = distributed::all_sum(full({3}, 1.0), sub);
    eval(reduced);
    EXPECT_EQ(reduced.to_vector<float>()[0], float(n));
    late = distributed::all_sum(full({3}, 2.0), sub);  // built, not evaluated
    watched = sub;
  }
  EXPECT_TRUE(watched.expired()) << "something still holds the group";
  if (n == 1) return;  // a group of one returns its input: no op to fail
  try {
    eval(late);
    ADD_FAILURE() << "an op ran on a closed group";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("was closed"), std::string::npos) << error.what();
  }
  const Array again = distributed::all_sum(full({1}, 1.0));  // the world group goes on
  EXPECT_EQ(again.to_vector<float>()[0], float(n));
}

TEST(ArrayCollectives, InsideACompiledGraph) {
  const auto [begin, end] = my_inner();
  Graph graph;
  const Node x = graph.input("x", {kRows, end - begin});
  const Node w = graph.param("w", {end - begin, kCols});
  const Node partial = graph.matmul(x, w);
  const Node reduced = graph.custom_op("collective.all_reduce",
                                       distributed::collective_attrs(ReduceOp::sum, 0), {partial});
  graph.set_outputs({graph.gelu(reduced)});
  CompiledGraph compiled = compile(graph);
  compiled.set_param("w", slice(full_w(), {begin, 0}, {end, kCols}));
  for (int run = 0; run < 3; ++run) {
    const auto outputs = compiled.run({{"x", slice(full_x(), {0, begin}, {kRows, end})}});
    ASSERT_EQ(outputs.size(), 1u);
    expect_close(outputs[0], gelu(matmul(full_x(), full_w())), 1e-5);
  }
}

// Three gradients of different shapes: one fused all-reduce, in place in the
// plan's arena, run after run.
TEST(ArrayCollectives, ACompiledGraphFusesItsAllReducesIntoOneStep) {
  const int n = group()->world_size(), me = group()->rank();
  const std::string sum = distributed::collective_attrs(ReduceOp::sum, 0);
  Graph graph;
  const Shape shapes[] = {{3}, {2, 5}, {7}};
  std::vector<Node> reduced;
  for (int i = 0; i < 3; ++i) {
    const Node g = graph.input("g" + std::to_string(i), shapes[i]);
    reduced.push_back(graph.custom_op("collective.all_reduce", sum, {graph.mul(g, g)}));
  }
  graph.set_outputs(reduced);
  CompiledGraph compiled = compile(graph);
  EXPECT_EQ(compiled.steps(), n == 1 ? 3u : 4u);  // three squares, one fused call
  for (int run = 1; run <= 3; ++run) {
    std::vector<std::vector<float>> values;
    for (const Shape& shape : shapes) {
      values.emplace_back(static_cast<std::size_t>(numel(shape)), static_cast<float>(me + run));
    }
    const Value inputs[] = {values[0], values[1], values[2]};
    const std::span<const Array> out = compiled.run_slots(inputs);
    float expected = 0;
    for (int r = 0; r < n; ++r) expected += static_cast<float>((r + run) * (r + run));
    for (std::size_t i = 0; i < 3; ++i) {
      for (float v : out[i].to_vector<float>()) EXPECT_EQ(v, expected) << "output " << i;
    }
  }
}

// The last rank plans the same all-reduces in the other order: the fused
// call has the same size, so only the plan check can tell. Every rank fails
// alike, and the group goes on.
TEST(ArrayCollectives, RanksWhoseCompiledGraphsDifferFailAlikeBeforeTheFirstRun) {
  const int n = group()->world_size(), me = group()->rank();
  if (n == 1) GTEST_SKIP() << "one rank plans alone";
  const std::string sum = distributed::collective_attrs(ReduceOp::sum, 0);
  Graph graph;
  const Node a = graph.input("a", {4});
  const Node b = graph.input("b", {2, 2});
  const Node ra = graph.custom_op("collective.all_reduce", sum, {graph.exp(a)});
  const Node rb = graph.custom_op("collective.all_reduce", sum, {graph.exp(b)});
  if (me == n - 1) {
    graph.set_outputs({rb, ra});
  } else {
    graph.set_outputs({ra, rb});
  }
  CompiledGraph compiled = compile(graph);
  try {
    compiled.run({{"a", std::vector<float>(4)}, {"b", std::vector<float>(4)}});
    ADD_FAILURE() << "a rank ran a graph that differs from the others'";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::mismatch);
    const std::string what = error.what();
    EXPECT_NE(what.find("plan different collectives"), std::string::npos) << what;
    EXPECT_NE(what.find("ranks " + std::to_string(n - 1)), std::string::npos) << what;
  }
  EXPECT_EQ(distributed::all_sum(full({1}, 1.0)).to_vector<float>()[0], float(n));
}

TEST(ArrayCollectives, AsyncEvalOverlapsTheCollectiveWithLocalWork) {
  const auto [begin, end] = my_inner();
  const Array y = distributed::all_sum(
      matmul(slice(full_x(), {0, begin}, {kRows, end}), slice(full_w(), {begin, 0}, {end, kCols})));
  AsyncEval pending = async_eval(y);
  const Array local = matmul(full_x(), full_w());  // computed meanwhile on this thread
  eval(local);
  pending.wait();
  expect_close(y, local, 1e-5);
}

TEST(ArrayCollectives, AllGatherConcatenatesAlongAxisZeroInRankOrder) {
  const int n = group()->world_size();
  const Array mine = full({2, 3}, static_cast<double>(group()->rank()), Dtype::i32);
  const Array all = distributed::all_gather(mine);
  ASSERT_EQ(all.shape(), (Shape{2 * n, 3}));
  const auto values = all.to_vector<std::int32_t>();
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], static_cast<int>(i / 6));
}

TEST(ArrayCollectives, BroadcastGivesEveryRankTheRootsArray) {
  const int n = group()->world_size();
  const Array mine = full({3, 2}, static_cast<double>(group()->rank() + 10), Dtype::i32);
  const Array from_last = distributed::broadcast(mine, n - 1);
  for (std::int32_t v : from_last.to_vector<std::int32_t>()) EXPECT_EQ(v, n - 1 + 10);
  EXPECT_THROW(distributed::broadcast(mine, n), Error);
  EXPECT_THROW(custom_op("collective.broadcast", {mine}, "0"), Error);
}

TEST(ArrayCollectives, AllToAllSendsBlockJToRankJ) {
  const int n = group()->world_size(), me = group()->rank();
  // Row j of rank r's input holds 100 r + j: the row it sends to rank j.
  std::vector<std::int32_t> rows;
  for (int j = 0; j < n; ++j) rows.insert(rows.end(), {100 * me + j, 100 * me + j});
  const Array mine = Array::from(rows, {n, 2});
  const Array routed = distributed::all_to_all(mine);
  ASSERT_EQ(routed.shape(), (Shape{n, 2}));
  const auto values = routed.to_vector<std::int32_t>();
  for (int i = 0; i < n; ++i) EXPECT_EQ(values[2 * static_cast<std::size_t>(i)], 100 * i + me);
  if (n > 1) {
    EXPECT_THROW(distributed::all_to_all(ones({n + 1})), ShapeError);
  }
}

TEST(ArrayCollectives, SendAndRecvLikePassAnArrayAroundTheRing) {
  const int n = group()->world_size(), me = group()->rank();
  const Array mine = full({2, 3}, me + 0.5, Dtype::f32);
  const Array sent = distributed::send(mine, (me + 1) % n, 5);
  const Array received = distributed::recv_like(mine, (me + n - 1) % n, 5);
  eval(sent, received);
  for (float v : received.to_vector<float>())
    EXPECT_EQ(v, static_cast<float>((me + n - 1) % n) + 0.5f);
  for (float v : sent.to_vector<float>()) EXPECT_EQ(v, static_cast<float>(me) + 0.5f);
  EXPECT_THROW(distributed::send(mine, n, 5), Error);
  EXPECT_THROW(custom_op("collective.recv_like", {mine}, "0 5"), Error);
}

TEST(ArrayCollectives, BadAttributesAreClearErrors) {
  const Array x = ones({2});
  EXPECT_THROW(custom_op("collective.all_reduce", {x}, "average 0"), Error);
  EXPECT_THROW(custom_op("collective.all_reduce", {x}, "sum 99"), Error);
  EXPECT_THROW(distributed::all_gather(full({}, 1.0)), ShapeError);
}

}  // namespace
}  // namespace rlx
