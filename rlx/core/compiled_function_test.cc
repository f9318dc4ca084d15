#include "rlx/core/compiled_function.h"

#include <gtest/gtest.h>

#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::expect_error;

// y = x * scale + sum(x), for any shape of x.
struct ScaledSum {
  int builds = 0;
  CompiledFunction function{[this](std::span<const InputSpec> inputs) {
    ++builds;
    Graph graph;
    const Node x = graph.input("x", inputs[0].shape, inputs[0].dtype);
    const Node scale = graph.param("scale", {}, inputs[0].dtype);
    std::vector<int> axes(inputs[0].shape.size());
    for (std::size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int>(i);
    graph.set_outputs({graph.add(graph.mul(x, scale), graph.sum(x, axes))});
    return graph;
  }};
};

TEST(CompiledFunction, ANewShapeCompilesOnceAndASeenShapeReplays) {
  ScaledSum f;
  f.function.set_param("scale", Array::scalar(2.0f));
  const Array three = Array::from(std::vector<float>{1, 2, 3}, {3});
  const Array four = Array::from(std::vector<float>{1, 1, 1, 1}, {2, 2});
  const Array other = Array::from(std::vector<float>{0, 0, 6}, {3});
  EXPECT_EQ(f.function.run({&three, 1})[0].to_vector<float>(), (std::vector<float>{8, 10, 12}));
  EXPECT_EQ(f.function.run({&three, 1})[0].to_vector<float>(), (std::vector<float>{8, 10, 12}));
  EXPECT_EQ(f.builds, 1);
  EXPECT_EQ(f.function.run({&four, 1})[0].to_vector<float>(), std::vector<float>(4, 6));
  EXPECT_EQ(f.builds, 2);
  EXPECT_EQ(f.function.run({&other, 1})[0].to_vector<float>(), (std::vector<float>{6, 6, 18}));
  EXPECT_EQ(f.function.run({&four, 1})[0].to_vector<float>(), std::vector<float>(4, 6));
  EXPECT_EQ(f.builds, 2);
  EXPECT_EQ(f.function.compiled(), 2u);
  // A parameter set later reaches every compiled shape.
  f.function.set_param("scale", Array::scalar(0.0f));
  EXPECT_EQ(f.function.run({&three, 1})[0].to_vector<float>(), std::vector<float>(3, 6));
  EXPECT_EQ(f.function.run({&four, 1})[0].to_vector<float>(), std::vector<float>(4, 4));
}

TEST(CompiledFunction, TheDtypeIsPartOfTheKey) {
  ScaledSum f;
  const Array floats = Array::from(std::vector<float>{1, 2}, {2});
  const Array doubles = Array::from(std::vector<double>{1, 2}, {2});
  f.function.set_param("scale", Array::scalar(1.0f));
  f.function.run({&floats, 1});
  // The f64 graph declares an f64 scale: the f32 value set before does not fit.
  expect_error<Error>([&] { f.function.run({&doubles, 1}); }, "set_param: parameter 'scale'");
  EXPECT_EQ(f.builds, 2);
}

TEST(CompiledFunction, TheInputCountMustMatchTheGraph) {
  ScaledSum f;
  f.function.set_param("scale", Array::scalar(1.0f));
  const Array inputs[] = {Array::from(std::vector<float>{1}, {1}),
                          Array::from(std::vector<float>{1}, {1})};
  expect_error<Error>([&] { f.function.run(inputs); },
                      "got 2 inputs where the graph built for them takes 1");
  expect_error<Error>([] { CompiledFunction({}); }, "needs a function that builds the graph");
}

}  // namespace
}  // namespace rlx
