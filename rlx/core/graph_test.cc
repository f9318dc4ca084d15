#include "rlx/core/graph.h"

#include <atomic>

#include <gtest/gtest.h>

#include "rlx/core/compiled_graph.h"
#include "rlx/core/custom.h"
#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::expect_error;

// y = relu(x @ w + b), plus its total: two outputs.
struct DenseGraph {
  Graph graph;
  Node x = graph.input("x", {2, 3});
  Node w = graph.param("w", {3, 4});
  Node b = graph.param("b", {4});
  Node y = graph.relu(graph.add(graph.matmul(x, w), b));
  Node total = graph.sum(y, {0, 1});
  DenseGraph() { graph.set_outputs({y, total}); }
};

const std::vector<float> kX{1, -2, 3, 0.5f, 1, -1};
const std::vector<float> kW{0.1f, 0.2f, -0.3f, 0.4f, 0.5f,  -0.6f,
                            0.7f, 0.8f, 0.9f,  1.0f, -1.1f, 1.2f};
const std::vector<float> kB{0.5f, -0.5f, 0.25f, 0};

TEST(Graph, InfersShapesAsNodesAreAddedAndRejectsMismatchesThen) {
  DenseGraph dense;
  EXPECT_EQ(dense.graph.shape(dense.y), (Shape{2, 4}));
  EXPECT_EQ(dense.graph.shape(dense.total), Shape{});
  EXPECT_EQ(dense.graph.dtype(dense.y), Dtype::f32);
  EXPECT_EQ(dense.graph.info(dense.y).op, "relu");
  Graph g;
  Node x = g.input("x", {2, 3});
  Node w = g.param("w", {4, 5});
  expect_error<ShapeError>([&] { g.matmul(x, w); },
                           "matmul: inner dimensions differ: (2, 3) x (4, 5)");
  expect_error<Error>([&] { g.add(x, g.input("i", {2, 3}, Dtype::i32)); }, "add: dtypes differ");
  expect_error<Error>([&] { g.param("x", {1}); }, "the name 'x' is taken");
  expect_error<Error>([&] { g.relu(dense.x); }, "belongs to another graph");
}

TEST(CompiledGraph, RunsAndMatchesTheArrayOps) {
  DenseGraph dense;
  CompiledGraph compiled = compile(dense.graph);
  compiled.set_param("w", kW);
  compiled.set_param("b", Array::from(kB, {4}));
  const std::vector<Array> out = compiled.run({{"x", kX}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].is_evaluated());
  EXPECT_TRUE(out[1].is_evaluated());
  const Array expected =
      relu(matmul(Array::from(kX, {2, 3}), Array::from(kW, {3, 4})) + Array::from(kB, {4}));
  EXPECT_EQ(out[0].to_vector<float>(), expected.to_vector<float>());
  EXPECT_FLOAT_EQ(out[1].item<float>(), sum(expected).item<float>());
  // Runs again with other inputs; parameters stay.
  const std::vector<float> zeros(6, 0.0f);
  EXPECT_EQ(compiled.run({{"x", zeros}})[0].to_vector<float>(),
            (std::vector<float>{0.5f, 0, 0.25f, 0, 0.5f, 0, 0.25f, 0}));
}

TEST(CompiledGraph, InputAndParameterMistakesNameTheInput) {
  DenseGraph dense;
  CompiledGraph compiled = compile(dense.graph);
  expect_error<Error>([&] { compiled.run({{"x", kX}}); }, "run: parameter 'w' is not set");
  compiled.set_param("w", kW);
  compiled.set_param("b", kB);
  expect_error<Error>([&] { compiled.run({}); }, "run: missing input 'x' of (2, 3) f32");
  expect_error<Error>(
      [&] {
        compiled.run({{"x", std::vector<float>(5)}});
      },
      "run: input 'x': got 5 f32 values where the graph declares (2, 3) f32, 6");
  expect_error<Error>([&] { compiled.run({{"x", std::vector<double>(6)}}); }, "got 6 f64 values");
  expect_error<Error>(
      [&] {
        compiled.run({{"x", zeros({3, 2})}});
      },
      "run: input 'x': got an array of (3, 2) f32 where the graph declares (2, 3)");
  expect_error<Error>([&] { compiled.run({{"x", kX}, {"z", kX}}); }, "no input named 'z'");
  expect_error<Error>(
      [&] {
        compiled.run({{"x", kX}, {"w", kW}});
      },
      "'w' is a parameter, not an input");
  expect_error<Error>([&] { compiled.run({{"x", kX}, {"x", kX}}); }, "input 'x' is fed twice");
  expect_error<Error>([&] { compiled.set_param("v", kW); }, "no parameter named 'v'");
  expect_error<Error>(
      [&] { compiled.set_param("b", kW); },
      "set_param: parameter 'b': got 12 f32 values where the graph declares (4) f32");
  expect_error<Error>([] { compile(Graph()); }, "compile: the graph has no outputs");
}

TEST(CompiledGraph, OnlyInputsTheOutputsNeedMustBeFedAndAnyDtypeComesBack) {
  Graph g;
  Node counts = g.input("counts", {3}, Dtype::i32);
  g.input("unused", {2});
  Node doubled = g.add(counts, counts);
  g.set_outputs({doubled, g.astype(doubled, Dtype::f64)});
  const std::vector<Array> out = compile(g).run({{"counts", std::vector<std::int32_t>{1, 2, 3}}});
  EXPECT_EQ(out[0].to_vector<std::int32_t>(), (std::vector<std::int32_t>{2, 4, 6}));
  EXPECT_EQ(out[1].to_vector<double>(), (std::vector<double>{2, 4, 6}));
}

// "graph_test.scale": x * factor, the factor as text in the attributes, run
// by a CPU function that counts its runs.
std::atomic<int> g_scale_runs{0};

void register_scale_op() {
  register_op_extension(
      {.name = "graph_test.scale",
       .num_inputs = 1,
       .infer_shape = [](std::span<const Shape> in, std::string_view) { return in[0]; }});
  register_array_kernel("graph_test.scale", [](std::span<const Array> in, std::string_view attrs) {
    const float factor = std::stof(std::string(attrs));
    return make_custom("graph_test.scale", in[0].shape(), in[0].dtype(), {in[0]},
                       [factor](std::span<const Array> inputs, Array& output) {
                         ++g_scale_runs;
                         const auto x = inputs[0].data<float>();
                         const auto y = output.mutable_data<float>();
                         for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * factor;
                       });
  });
}

TEST(CompiledGraph, RunsCustomOpsThroughTheRegistries) {
  register_scale_op();
  Graph g;
  Node x = g.input("x", {2, 2});
  Node bias = g.param("bias", {2});
  Node scaled = g.custom_op("graph_test.scale", "3", {x});
  EXPECT_EQ(g.shape(scaled), (Shape{2, 2}));
  EXPECT_EQ(g.info(scaled).attrs, "3");
  Node y = g.add(scaled, bias);
  g.set_outputs({y, scaled});
  CompiledGraph compiled = compile(g);
  compiled.set_param("bias", std::vector<float>{1, -1});
  const int before = g_scale_runs;
  std::vector<Array> out = compiled.run({{"x", std::vector<float>{1, 2, 3, 4}}});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(out[1].to_vector<float>(), (std::vector<float>{3, 6, 9, 12}));
  EXPECT_EQ(g_scale_runs - before, 1);  // shared by both outputs
  out = compiled.run({{"x", std::vector<float>{0, 0, 1, 1}}});
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, -1, 4, 2}));
  EXPECT_EQ(g_scale_runs - before, 2);
}

TEST(CompiledGraph, CustomOpShapesComeFromTheIrRegistry) {
  // (m) and (n) -> (m, n): only the extension knows.
  register_op_extension(
      {.name = "graph_test.outer",
       .num_inputs = 2,
       .infer_shape =
           [](std::span<const Shape> in, std::string_view) {
             return Shape{in[0][0], in[1][0]};
           },
       .infer_dtype = [](std::span<const Dtype>, std::string_view) { return Dtype::f64; }});
  Graph g;
  Node a = g.input("a", {3});
  Node b = g.input("b", {4});
  Node outer = g.custom_op("graph_test.outer", "", {a, b});
  EXPECT_EQ(g.shape(outer), (Shape{3, 4}));
  EXPECT_EQ(g.dtype(outer), Dtype::f64);
  expect_error<Error>([&] { g.custom_op("graph_test.outer", "", {a}); },
                      "graph_test.outer: takes 2 inputs, got 1");
  expect_error<Error>([&] { g.custom_op("graph_test.nowhere", "", {a}); },
                      "unknown op 'graph_test.nowhere'");
  g.set_outputs({outer});
  // No array kernel yet: compile says so.
  expect_error<Error>([&] { compile(g); }, "unknown op 'graph_test.outer'");
  // A kernel whose result disagrees with the inferred shape is caught when
  // compile lowers the graph.
  register_array_kernel("graph_test.outer", [](std::span<const Array> in, std::string_view) {
    return astype(in[0], Dtype::f64);
  });
  expect_error<Error>(
      [&] { compile(g); },
      "graph_test.outer: the array kernel returned (3) f64 where shape inference gave (3, 4) f64");
}

}  // namespace
}  // namespace rlx
