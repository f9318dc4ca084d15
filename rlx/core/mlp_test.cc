// A two-layer MLP written by hand with the array ops, forward and backward:
// the gradients agree with finite differences, and SGD lowers the loss.
#include <cmath>

#include <gtest/gtest.h>

#include "rlx/core/compiled_graph.h"
#include "rlx/core/eval.h"
#include "rlx/core/graph.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

constexpr std::int64_t kBatch = 8, kIn = 5, kHidden = 16, kClasses = 3;

struct Params {
  Array w1, b1, w2, b2;
};

Params init_params(Dtype dtype) {
  return {random_normal({kIn, kHidden}, 0, 0.5, 1, dtype), zeros({kHidden}, dtype),
          random_normal({kHidden, kClasses}, 0, 0.5, 2, dtype), zeros({kClasses}, dtype)};
}

struct Batch {
  Array x;       // (batch, in)
  Array labels;  // one-hot (batch, classes)
};

// Class = which of the first three features is largest: learnable.
Batch make_batch(Dtype dtype, std::uint64_t seed) {
  Array x = random_normal({kBatch, kIn}, 0, 1, seed, dtype);
  Array first = slice(x, {0, 0}, {kBatch, kClasses});
  Array labels = astype(equal(first, max(first, 1, true)), dtype);
  return {x, labels};
}

struct Forward {
  Array z1, h, logits, loss;
};

Forward forward(const Params& p, const Batch& batch) {
  Forward f;
  f.z1 = matmul(batch.x, p.w1) + p.b1;
  f.h = relu(f.z1);
  f.logits = matmul(f.h, p.w2) + p.b2;
  Array shifted = f.logits - max(f.logits, 1, true);
  Array log_probs = shifted - log(sum(exp(shifted), 1, true));
  f.loss = -mean(sum(batch.labels * log_probs, 1));
  return f;
}

Params backward(const Params& p, const Batch& batch, const Forward& f) {
  Array shifted = f.logits - max(f.logits, 1, true);
  Array probs = exp(shifted) / sum(exp(shifted), 1, true);
  Array dlogits = (probs - batch.labels) / static_cast<double>(kBatch);
  Array dh = matmul(dlogits, transpose(p.w2));
  Array dz1 = dh * astype(greater(f.z1, zeros({}, f.z1.dtype())), f.z1.dtype());
  return {matmul(transpose(batch.x), dz1), sum(dz1, 0), matmul(transpose(f.h), dlogits),
          sum(dlogits, 0)};
}

double loss_with(const Params& p, const Batch& batch) {
  return forward(p, batch).loss.item<double>();
}

// `a` with element i moved by delta.
Array nudged(const Array& a, std::size_t i, double delta) {
  std::vector<double> values = a.to_vector<double>();
  values[i] += delta;
  return Array::from(values, a.shape());
}

TEST(Mlp, HandWrittenGradientsMatchFiniteDifferences) {
  const Params p = init_params(Dtype::f64);
  const Batch batch = make_batch(Dtype::f64, 7);
  const Params grads = backward(p, batch, forward(p, batch));
  eval(grads.w1, grads.b1, grads.w2, grads.b2);
  const double eps = 1e-6;
  Array Params::*const members[] = {&Params::w1, &Params::b1, &Params::w2, &Params::b2};
  for (Array Params::*member : members) {
    const Array& param = p.*member;
    for (std::size_t i = 0; i < static_cast<std::size_t>(param.size()); i += 3) {
      Params plus = p, minus = p;
      plus.*member = nudged(param, i, eps);
      minus.*member = nudged(param, i, -eps);
      const double numeric = (loss_with(plus, batch) - loss_with(minus, batch)) / (2 * eps);
      EXPECT_NEAR((grads.*member).data<double>()[i], numeric, 1e-6) << "element " << i;
    }
  }
}

TEST(Mlp, SgdLowersTheLossAndTheGraphAgreesWithTheArrays) {
  Params p = init_params(Dtype::f32);
  const Batch batch = make_batch(Dtype::f32, 11);
  const float first = forward(p, batch).loss.item<float>();
  for (int step = 0; step < 50; ++step) {
    const Forward f = forward(p, batch);
    const Params g = backward(p, batch, f);
    p = {p.w1 - 0.5 * g.w1, p.b1 - 0.5 * g.b1, p.w2 - 0.5 * g.w2, p.b2 - 0.5 * g.b2};
    eval(p.w1, p.b1, p.w2, p.b2);
  }
  const float last = forward(p, batch).loss.item<float>();
  EXPECT_LT(last, 0.5f * first);

  // The same forward pass as a compiled graph, fed the trained parameters.
  Graph graph;
  Node x = graph.input("x", {kBatch, kIn});
  Node w1 = graph.param("w1", {kIn, kHidden});
  Node b1 = graph.param("b1", {kHidden});
  Node w2 = graph.param("w2", {kHidden, kClasses});
  Node b2 = graph.param("b2", {kClasses});
  Node h = graph.relu(graph.add(graph.matmul(x, w1), b1));
  graph.set_outputs({graph.add(graph.matmul(h, w2), b2)});
  CompiledGraph compiled = compile(graph);
  compiled.set_param("w1", p.w1);
  compiled.set_param("b1", p.b1);
  compiled.set_param("w2", p.w2);
  compiled.set_param("b2", p.b2);
  const std::vector<Array> logits = compiled.run({{"x", batch.x}});
  EXPECT_EQ(logits[0].to_vector<float>(), forward(p, batch).logits.to_vector<float>());
}

}  // namespace
}  // namespace rlx
