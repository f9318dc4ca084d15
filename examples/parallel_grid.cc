// Tensor and data parallelism at once, on two groups split from the job: the
// ranks form a grid of pairs. Inside a pair (the tensor-parallel group) a
// two-layer MLP is split Megatron-style: each rank holds half of the hidden
// units and the pair's partial outputs are summed by an all-reduce. Across
// pairs (the data-parallel group) each pair takes its own slice of the
// batch; an all_gather puts the batch back together and an all-reduce sums
// the loss. Every rank checks both against the single-process model.
//
//   rlxrun -n 4 build/release/examples/parallel_grid   # 2 pairs x 2 ranks
#include <cmath>
#include <cstdio>

#include <rlx/rlx.h>

namespace {

constexpr std::int64_t kBatch = 24, kModel = 32, kHidden = 128;

double worst_difference(const rlx::Array& got, const rlx::Array& want) {
  double worst = 0;
  const auto g = got.to_vector<float>(), w = want.to_vector<float>();
  for (std::size_t i = 0; i < g.size(); ++i)
    worst = std::max(worst, std::fabs(double(g[i]) - w[i]));
  return worst;
}

}  // namespace

int main() {
  try {
    const rlx::Group world = rlx::init();
    const int tp_size = world.size() % 2 == 0 ? 2 : 1;
    // Pairs of neighbours share a model shard; the i-th ranks of the pairs share data.
    const rlx::Group tensor = world.split(world.rank() / tp_size);
    const rlx::Group data = world.split(world.rank() % tp_size);
    const int tp = tensor.rank(), dp = data.rank(), dp_size = data.size();
    if (kBatch % dp_size != 0) throw rlx::Error("the batch must divide by the number of pairs");

    const rlx::Array x = rlx::random_normal({kBatch, kModel}, 0.0, 1.0, /*seed=*/1);
    const rlx::Array w1 = rlx::random_normal({kModel, kHidden}, 0.0, 0.125, /*seed=*/2);
    const rlx::Array w2 = rlx::random_normal({kHidden, kModel}, 0.0, 0.0625, /*seed=*/3);
    const std::int64_t rows = kBatch / dp_size, width = kHidden / tp_size;
    const rlx::Array my_rows = rlx::slice(x, {dp * rows, 0}, {(dp + 1) * rows, kModel});
    const rlx::Array w1_columns = rlx::slice(w1, {0, tp * width}, {kModel, (tp + 1) * width});
    const rlx::Array w2_rows = rlx::slice(w2, {tp * width, 0}, {(tp + 1) * width, kModel});

    // Nothing runs until eval: both groups' collectives are ops of one graph.
    const rlx::Array partial = rlx::matmul(rlx::gelu(rlx::matmul(my_rows, w1_columns)), w2_rows);
    const rlx::Array y_rows = rlx::distributed::all_sum(partial, tensor);
    const rlx::Array y = rlx::distributed::all_gather(y_rows, data);
    const rlx::Array loss = rlx::distributed::all_sum(rlx::sum(y_rows * y_rows), data);
    const rlx::Array y_single = rlx::matmul(rlx::gelu(rlx::matmul(x, w1)), w2);
    const rlx::Array loss_single = rlx::sum(y_single * y_single);
    rlx::eval(y, loss, y_single, loss_single);

    const double y_error = worst_difference(y, y_single);
    const double loss_error = std::fabs(loss.item<float>() - loss_single.item<float>());
    const bool ok = y_error <= 1e-5 && loss_error <= 1e-3 * std::fabs(loss_single.item<float>());
    std::printf(
        "parallel_grid: rank %d of %d (%s): tensor-parallel rank %d of %d, data-parallel rank "
        "%d of %d; max |y - y_single| = %.2e, loss %.4f against %.4f (%s)\n",
        world.rank(), world.size(), std::string(world.backend()).c_str(), tp, tp_size, dp, dp_size,
        y_error, loss.item<float>(), loss_single.item<float>(), ok ? "ok" : "TOO LARGE");
    return ok ? 0 : 1;
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "parallel_grid: %s\n", error.what());
    return 1;
  }
}
