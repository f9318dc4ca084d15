// overlap-bench: does async_eval hide a tensor-parallel layer's all-reduce
// behind compute? Runs under rlxrun (or mpirun):
//
//   rlxrun -n 2 build/release/bench/overlap-bench [--micro-batches 8] [--reps 7]
//
// A two-layer MLP forward, Megatron-style (a column-parallel linear layer,
// gelu, then a row-parallel one whose partial sums are all-reduced), over M
// micro-batches. Three timings, each the median over repetitions of the
// slowest rank:
//   compute   every micro-batch's forward with the all-reduce left out;
//   comm      the all-reduces alone, on arrays of the same size;
//   overlap   micro-batch k+1's forward on this thread while micro-batch k's
//             all-reduce runs on async_eval's worker thread;
//   compiled  the whole forward as one compiled graph, each micro-batch's
//             all-reduce its own fused call (the batch cap is one output),
//             which the plan runs in the background while the next
//             micro-batch computes.
// The ratio overlap / (compute + comm) is below 1 when overlap pays.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cblas.h>

#include "rlx/rlx.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int micro_batches = 8;
  int reps = 7;
  std::int64_t batch = 64;    // rows per micro-batch
  std::int64_t model = 4096;  // the model dimension (all-reduced)
  std::int64_t hidden = 256;  // the hidden dimension, split across ranks
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const long value = std::atol(argv[i + 1]);
    if (std::strcmp(argv[i], "--micro-batches") == 0)
      o.micro_batches = static_cast<int>(value);
    else if (std::strcmp(argv[i], "--reps") == 0)
      o.reps = static_cast<int>(value);
    else if (std::strcmp(argv[i], "--batch") == 0)
      o.batch = value;
    else if (std::strcmp(argv[i], "--model") == 0)
      o.model = value;
    else if (std::strcmp(argv[i], "--hidden") == 0)
      o.hidden = value;
    else {
      std::fprintf(stderr,
                   "usage: %s [--micro-batches M] [--reps R] [--batch B] [--model D] "
                   "[--hidden H]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  return o;
}

class TensorParallelMlp {
 public:
  TensorParallelMlp(const Options& o, int rank, int ranks)
      : w1_(rlx::random_normal({o.model, o.hidden / ranks}, 0.0, 0.02, 100 + rank)),
        w2_(rlx::random_normal({o.hidden / ranks, o.model}, 0.0, 0.02, 200 + rank)) {
    rlx::eval(w1_, w2_);
    for (int k = 0; k < o.micro_batches; ++k) {
      inputs_.push_back(rlx::random_normal({o.batch, o.model}, 0.0, 1.0, 300 + k));
    }
    rlx::eval(std::span<const rlx::Array>(inputs_));
  }

  // This rank's partial sum of micro-batch k's output (no communication).
  rlx::Array partial(int k) const {
    return rlx::matmul(rlx::gelu(rlx::matmul(inputs_[static_cast<std::size_t>(k)], w1_)), w2_);
  }
  int micro_batches() const { return static_cast<int>(inputs_.size()); }

  // Every micro-batch's forward and all-reduce, planned once.
  rlx::CompiledGraph compiled() const {
    rlx::Graph graph;
    const rlx::Node w1 = graph.constant(w1_);
    const rlx::Node w2 = graph.constant(w2_);
    std::vector<rlx::Node> outputs;
    for (const rlx::Array& input : inputs_) {
      const rlx::Node y = graph.matmul(graph.gelu(graph.matmul(graph.constant(input), w1)), w2);
      outputs.push_back(graph.custom_op(
          "collective.all_reduce", rlx::distributed::collective_attrs(rlx::ReduceOp::sum, 0), {y}));
    }
    graph.set_outputs(outputs);
    rlx::set_batch_bytes_cap(inputs_[0].nbytes());  // one all-reduce per micro-batch
    rlx::CompiledGraph plan = rlx::compile(graph);
    rlx::set_batch_bytes_cap(std::size_t{25} << 20);
    plan.run_slots({});  // lays out the arena
    return plan;
  }

 private:
  rlx::Array w1_, w2_;
  std::vector<rlx::Array> inputs_;
};

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double time_compute(const TensorParallelMlp& mlp) {
  const auto start = Clock::now();
  for (int k = 0; k < mlp.micro_batches(); ++k) rlx::eval(mlp.partial(k));
  return seconds_since(start);
}

double time_comm(const TensorParallelMlp& mlp, const std::vector<rlx::Array>& partials) {
  const auto start = Clock::now();
  for (int k = 0; k < mlp.micro_batches(); ++k) {
    rlx::eval(rlx::distributed::all_sum(partials[static_cast<std::size_t>(k)]));
  }
  return seconds_since(start);
}

// Micro-batch k's all-reduce runs on the worker while k + 1 computes here.
double time_overlapped(const TensorParallelMlp& mlp) {
  const auto start = Clock::now();
  std::vector<rlx::AsyncEval> pending;
  for (int k = 0; k < mlp.micro_batches(); ++k) {
    rlx::Array p = mlp.partial(k);
    rlx::eval(p);
    pending.push_back(rlx::async_eval(rlx::distributed::all_sum(p)));
  }
  for (const auto& p : pending) p.wait();
  return seconds_since(start);
}

double time_compiled(rlx::CompiledGraph& plan) {
  const auto start = Clock::now();
  plan.run_slots({});
  return seconds_since(start);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  openblas_set_num_threads(1);  // one core per rank: ranks share this host's cores
  auto group = rlx::init();
  const TensorParallelMlp mlp(o, group->rank(), group->world_size());
  std::vector<rlx::Array> partials;
  for (int k = 0; k < o.micro_batches; ++k) partials.push_back(mlp.partial(k));
  rlx::eval(std::span<const rlx::Array>(partials));

  rlx::CompiledGraph plan = mlp.compiled();
  std::vector<double> compute, comm, overlap, compiled;
  auto slowest = [&](double t) {
    group->all_reduce(std::span(&t, 1), rlx::ReduceOp::max);
    return t;
  };
  for (int rep = 0; rep < o.reps + 1; ++rep) {  // the first repetition warms up
    group->barrier();
    const double c = slowest(time_compute(mlp));
    group->barrier();
    const double m = slowest(time_comm(mlp, partials));
    group->barrier();
    const double v = slowest(time_overlapped(mlp));
    group->barrier();
    const double p = slowest(time_compiled(plan));
    if (rep == 0) continue;
    compute.push_back(c);
    comm.push_back(m);
    overlap.push_back(v);
    compiled.push_back(p);
  }
  if (group->rank() == 0) {
    const double c = median(compute), m = median(comm), v = median(overlap), p = median(compiled);
    std::printf(
        "# overlap-bench: %d ranks, %d micro-batches of [%lld x %lld] (all-reduce %.2f MiB each), "
        "hidden %lld\n",
        group->world_size(), o.micro_batches, static_cast<long long>(o.batch),
        static_cast<long long>(o.model), o.batch * o.model * 4.0 / (1 << 20),
        static_cast<long long>(o.hidden));
    std::printf(
        "compute %.2f ms | comm %.2f ms | sum %.2f ms | overlapped %.2f ms | ratio %.2f | "
        "compiled %.2f ms | ratio %.2f\n",
        c * 1e3, m * 1e3, (c + m) * 1e3, v * 1e3, v / (c + m), p * 1e3, p / (c + m));
  }
  return 0;
}
