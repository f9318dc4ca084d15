// compiled-graph-bench: what a compiled graph's planned run saves over
// building lazy arrays and evaluating them every step. Runs alone or under
// rlxrun (or mpirun):
//
//   rlxrun -n 2 build/release/bench/compiled-graph-bench [--iters 2000] [--reps 5]
//
// Two models, each at a small and a large size:
//   mlp    a tensor-parallel two-layer MLP: x @ w1 (this rank's columns),
//          gelu, @ w2 (this rank's rows), all_sum of the partial outputs;
//   train  one data-parallel SGD step of linear regression: the gradient
//          x^T (x w - y) / batch, all-reduced, and w -= lr * g (carried).
// Three ways to run each step:
//   eager     the array ops and eval(), as CompiledGraph::run did before
//             it planned (it lowered the graph onto lazy arrays each run);
//   run       CompiledGraph::run with named inputs (copies its outputs);
//   planned   CompiledGraph::run_slots: the arena, nothing allocated.
// Each figure is the median over repetitions of the slowest rank's mean
// time per step; the modes alternate inside each repetition.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace {

using Clock = std::chrono::steady_clock;
using rlx::Array;
using rlx::Graph;
using rlx::Node;

struct Options {
  int iters = 2000;
  int reps = 5;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int value = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--iters") == 0 && value > 0) {
      o.iters = value;
    } else if (std::strcmp(argv[i], "--reps") == 0 && value > 0) {
      o.reps = value;
    } else {
      std::fprintf(stderr, "usage: %s [--iters N] [--reps R]\n", argv[0]);
      std::exit(2);
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "usage: %s [--iters N] [--reps R]\n", argv[0]);
    std::exit(2);
  }
  return o;
}

std::vector<float> values(std::int64_t n, float scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(i % 13) - scale * 6;
  return v;
}

// Mean microseconds per call of `step` over `iters` calls, slowest rank.
double time_us(const rlx::Group& group, int iters, const std::function<void()>& step) {
  group->barrier();
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) step();
  double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
  group->all_reduce(rlx::ElementSpan{&us, 1, rlx::Dtype::f64}, rlx::ReduceOp::max);
  return us;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Case {
  std::string name;
  std::function<void()> eager, run, planned;
};

Case mlp_case(const rlx::Group& group, std::int64_t batch, std::int64_t model,
              std::int64_t hidden) {
  const std::int64_t part = hidden / group.size();
  auto x = std::make_shared<std::vector<float>>(values(batch * model, 0.01f));
  const Array w1 = Array::from(values(model * part, 0.02f), {model, part});
  const Array w2 = Array::from(values(part * model, 0.03f), {part, model});
  Graph graph;
  const Node xn = graph.input("x", {batch, model});
  const Node h = graph.gelu(graph.matmul(xn, graph.param("w1", {model, part})));
  const Node y = graph.custom_op("collective.all_reduce",
                                 rlx::distributed::collective_attrs(rlx::ReduceOp::sum, 0),
                                 {graph.matmul(h, graph.param("w2", {part, model}))});
  graph.set_outputs({y});
  auto compiled = std::make_shared<rlx::CompiledGraph>(rlx::compile(graph));
  compiled->set_param("w1", w1);
  compiled->set_param("w2", w2);
  char name[96];
  std::snprintf(name, sizeof name, "mlp %lldx%lld, hidden %lld", static_cast<long long>(batch),
                static_cast<long long>(model), static_cast<long long>(hidden));
  return {name,
          [=] {
            const Array xa = Array::from(*x, {batch, model});
            rlx::eval(rlx::distributed::all_sum(rlx::matmul(rlx::gelu(rlx::matmul(xa, w1)), w2)));
          },
          [=] {
            compiled->run({{"x", *x}});
          },
          [=] {
            const rlx::Value inputs[] = {*x};
            compiled->run_slots(inputs);
          }};
}

Case train_case(std::int64_t batch, std::int64_t features) {
  auto x = std::make_shared<std::vector<float>>(values(batch * features, 0.01f));
  auto y = std::make_shared<std::vector<float>>(values(batch, 0.1f));
  auto w = std::make_shared<Array>(Array::from(values(features, 0.0f), {features, 1}));
  const float lr = 0.01f / static_cast<float>(batch);
  Graph graph;
  const Node xn = graph.input("x", {batch, features});
  const Node yn = graph.input("y", {batch, 1});
  const Node wn = graph.param("w", {features, 1});
  const Node err = graph.sub(graph.matmul(xn, wn), yn);
  const Node grad = graph.matmul(graph.transpose(xn), err);
  const Node summed = graph.custom_op(
      "collective.all_reduce", rlx::distributed::collective_attrs(rlx::ReduceOp::sum, 0), {grad});
  const Node step = graph.constant(Array::from(std::vector<float>{lr}, {1}));
  graph.set_outputs({graph.sub(wn, graph.mul(step, summed))});
  auto compiled = std::make_shared<rlx::CompiledGraph>(rlx::compile(graph));
  compiled->set_param("w", *w);
  compiled->carry(0, "w");
  char name[96];
  std::snprintf(name, sizeof name, "train %lldx%lld", static_cast<long long>(batch),
                static_cast<long long>(features));
  return {name,
          [=] {
            const Array xa = Array::from(*x, {batch, features});
            const Array ya = Array::from(*y, {batch, 1});
            const Array g = rlx::distributed::all_sum(
                rlx::matmul(rlx::transpose(xa), rlx::matmul(xa, *w) - ya));
            *w = *w - g * static_cast<double>(lr);
            rlx::eval(*w);
          },
          [=] {
            compiled->run({{"x", *x}, {"y", *y}});
          },
          [=] {
            const rlx::Value inputs[] = {*x, *y};
            compiled->run_slots(inputs);
          }};
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const rlx::Group group = rlx::init();
  std::vector<Case> cases;
  cases.push_back(mlp_case(group, 8, 128, 64));
  cases.push_back(mlp_case(group, 64, 128, 256));
  cases.push_back(mlp_case(group, 256, 1024, 4096));
  cases.push_back(train_case(64, 32));
  cases.push_back(train_case(4096, 512));
  if (group.rank() == 0) {
    std::printf("# compiled-graph-bench: %d ranks, %d reps; us per step (slowest rank, median)\n",
                group.size(), options.reps);
    std::printf("%-28s %10s %10s %10s %14s\n", "case", "eager", "run", "planned", "eager/planned");
  }
  for (const Case& c : cases) {
    const int iters = std::max(
        10, c.name.find("1024") != std::string::npos || c.name.find("4096") != std::string::npos
                ? options.iters / 50
                : options.iters);
    c.planned();  // lays out the arena
    std::vector<double> eager, run, planned;
    for (int rep = 0; rep < options.reps; ++rep) {
      eager.push_back(time_us(group, iters, c.eager));
      run.push_back(time_us(group, iters, c.run));
      planned.push_back(time_us(group, iters, c.planned));
    }
    if (group.rank() == 0) {
      std::printf("%-28s %10.2f %10.2f %10.2f %13.2fx\n", c.name.c_str(), median(eager),
                  median(run), median(planned), median(eager) / median(planned));
    }
  }
  return 0;
}
