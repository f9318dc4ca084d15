// A two-layer MLP split Megatron-style across the ranks: the first layer's
// weight by columns (each rank computes a slice of the hidden units, no
// communication), the second by rows (each rank's partial output is summed by
// one all-reduce inside the graph). Every rank checks the result against the
// single-process model.
//
//   rlxrun -n 4 build/release/examples/tensor_parallel_mlp
#include <cmath>
#include <cstdio>

#include <rlx/rlx.h>

namespace {

constexpr std::int64_t kBatch = 32, kModel = 64, kHidden = 256;

}  // namespace

int main() {
  try {
    auto group = rlx::init();
    const int n = group->world_size(), rank = group->rank();
    if (kHidden % n != 0) throw rlx::Error("the hidden size must divide by the number of ranks");
    // Every rank builds the same full weights from the same seeds, then keeps its shard.
    const rlx::Array x = rlx::random_normal({kBatch, kModel}, 0.0, 1.0, /*seed=*/1);
    const rlx::Array w1 = rlx::random_normal({kModel, kHidden}, 0.0, 0.125, /*seed=*/2);
    const rlx::Array w2 = rlx::random_normal({kHidden, kModel}, 0.0, 0.0625, /*seed=*/3);
    const std::int64_t begin = rank * (kHidden / n), end = begin + kHidden / n;
    const rlx::Array w1_columns = rlx::slice(w1, {0, begin}, {kModel, end});
    const rlx::Array w2_rows = rlx::slice(w2, {begin, 0}, {end, kModel});

    const rlx::Array hidden = rlx::gelu(rlx::matmul(x, w1_columns));               // local
    const rlx::Array y = rlx::distributed::all_sum(rlx::matmul(hidden, w2_rows));  // one all-reduce
    const rlx::Array reference = rlx::matmul(rlx::gelu(rlx::matmul(x, w1)), w2);
    rlx::eval(y, reference);

    double worst = 0;
    const auto got = y.to_vector<float>(), want = reference.to_vector<float>();
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    }
    const bool ok = worst <= 1e-5;
    std::printf(
        "tensor_parallel_mlp: rank %d of %d (%s): output %lld x %lld, max |y - y_single| = %.2e "
        "(%s)\n",
        rank, n, std::string(group->backend()).c_str(), static_cast<long long>(y.dim(0)),
        static_cast<long long>(y.dim(1)), worst, ok ? "ok" : "TOO LARGE");
    return ok ? 0 : 1;
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "tensor_parallel_mlp: %s\n", error.what());
    return 1;
  }
}
