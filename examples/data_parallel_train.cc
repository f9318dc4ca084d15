// Data-parallel SGD on a synthetic linear regression: every rank holds a
// shard of the batch, computes its gradient, and the gradients are summed by
// an all-reduce inside the graph. Rank 0 prints the loss curve; every rank
// checks its final weights against a single-process run over the whole batch,
// and against the same training on the compiled path (one graph for the
// step, planned once, the weights carried from run to run).
//
//   rlxrun -n 4 build/release/examples/data_parallel_train
#include <cmath>
#include <cstdio>

#include <rlx/rlx.h>

namespace {

constexpr std::int64_t kSamples = 512, kFeatures = 16;
constexpr int kSteps = 60;
constexpr double kLearningRate = 0.1;

struct Data {
  rlx::Array x, y;
};

// The whole synthetic task, identical on every rank: y = x w* + noise.
Data make_data() {
  const rlx::Array x = rlx::random_normal({kSamples, kFeatures}, 0.0, 1.0, /*seed=*/5);
  const rlx::Array w_true = rlx::random_uniform({kFeatures, 1}, -1.0, 1.0, /*seed=*/6);
  const rlx::Array noise = rlx::random_normal({kSamples, 1}, 0.0, 0.01, /*seed=*/7);
  return {x, rlx::matmul(x, w_true) + noise};
}

// One SGD step on (x, y), a shard of the batch. `reduce` turns the shard's
// gradient and squared-error sum into the whole batch's.
template <class Reduce>
rlx::Array step(const rlx::Array& w, const Data& shard, Reduce reduce, rlx::Array* loss) {
  const rlx::Array error = rlx::matmul(shard.x, w) - shard.y;
  const rlx::Array grad = reduce(rlx::matmul(rlx::transpose(shard.x), error)) * (2.0 / kSamples);
  *loss = reduce(rlx::sum(error * error)) / static_cast<double>(kSamples);
  return w - grad * kLearningRate;
}

// The distributed step as a compiled graph: outputs the new weights, which
// carry() feeds back as `w`, and the loss.
rlx::CompiledGraph compiled_step(std::int64_t rows) {
  rlx::Graph g;
  const rlx::Node x = g.input("x", {rows, kFeatures});
  const rlx::Node y = g.input("y", {rows, 1});
  const rlx::Node w = g.param("w", {kFeatures, 1});
  auto all_sum = [&g](rlx::Node a) {
    return g.custom_op("collective.all_reduce",
                       rlx::distributed::collective_attrs(rlx::ReduceOp::sum, 0), {a});
  };
  auto scalar = [&g](double v) { return g.constant(rlx::Array::scalar(static_cast<float>(v))); };
  const rlx::Node error = g.sub(g.matmul(x, w), y);
  const rlx::Node grad = g.mul(all_sum(g.matmul(g.transpose(x), error)), scalar(2.0 / kSamples));
  const rlx::Node loss =
      g.div(all_sum(g.sum(g.mul(error, error), {0, 1})), scalar(static_cast<double>(kSamples)));
  g.set_outputs({g.sub(w, g.mul(grad, scalar(kLearningRate))), loss});
  rlx::CompiledGraph compiled = rlx::compile(g);
  compiled.set_param("w", rlx::zeros({kFeatures, 1}));
  compiled.carry(0, "w");
  return compiled;
}

}  // namespace

int main() {
  try {
    auto group = rlx::init();
    const int n = group->world_size(), rank = group->rank();
    if (kSamples % n != 0) throw rlx::Error("the batch must divide by the number of ranks");
    const Data all = make_data();
    const std::int64_t rows = kSamples / n;
    const Data shard{rlx::slice(all.x, {rank * rows, 0}, {(rank + 1) * rows, kFeatures}),
                     rlx::slice(all.y, {rank * rows, 0}, {(rank + 1) * rows, 1})};

    rlx::Array w = rlx::zeros({kFeatures, 1});
    rlx::Array w_single = w, loss, ignored;
    auto all_sum = [](const rlx::Array& a) { return rlx::distributed::all_sum(a); };
    auto local = [](const rlx::Array& a) { return a; };
    for (int s = 0; s < kSteps; ++s) {
      w = step(w, shard, all_sum, &loss);
      w_single = step(w_single, all, local, &ignored);
      rlx::eval(w, loss, w_single);  // one eval per step keeps the graph small
      if (rank == 0 && (s % 10 == 0 || s == kSteps - 1)) {
        std::printf("step %2d  loss %.6f\n", s, static_cast<double>(loss.item<float>()));
      }
    }
    rlx::CompiledGraph compiled = compiled_step(rows);
    const rlx::Value inputs[] = {shard.x, shard.y};
    for (int s = 0; s < kSteps; ++s) compiled.run_slots(inputs);
    auto max_difference = [](const rlx::Array& a, const rlx::Array& b) {
      double worst = 0;
      const auto got = a.to_vector<float>(), want = b.to_vector<float>();
      for (std::size_t i = 0; i < got.size(); ++i) {
        worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
      }
      return worst;
    };
    const double worst = max_difference(w, w_single);
    const double compiled_worst = max_difference(compiled.param("w"), w);
    const bool ok = worst <= 1e-4 && compiled_worst == 0 && loss.item<float>() < 1e-3f;
    std::printf(
        "data_parallel_train: rank %d of %d (%s): final loss %.6f, max |w - w_single| = %.2e, "
        "compiled path max |w - w_eager| = %.2e (%s)\n",
        rank, n, std::string(group->backend()).c_str(), static_cast<double>(loss.item<float>()),
        worst, compiled_worst, ok ? "ok" : "MISMATCH");
    return ok ? 0 : 1;
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "data_parallel_train: %s\n", error.what());
    return 1;
  }
}
