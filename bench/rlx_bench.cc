// rlx-bench: the collective sweep over rlx, on whatever transport rlx::init
// picks (rlxrun: tcp or verbs; mpirun: mpi). See bench/sweep.h for the columns.
//
//   rlxrun -n 2 build/release/bench/rlx-bench --op all_sum -b 4 -e 64M
#include <cstdio>

#include "bench/sweep_driver.h"
#include "rlx/rlx.h"

namespace {

class RlxComm {
 public:
  explicit RlxComm(std::shared_ptr<rlx::Transport> group) : group_(std::move(group)) {}
  int rank() { return group_->rank(); }
  int size() { return group_->world_size(); }
  void all_sum(float* data, std::size_t count) { group_->all_sum(std::span(data, count)); }
  void all_gather(const float* in, float* out, std::size_t count) {
    group_->all_gather(std::span(in, count),
                       std::span(out, count * static_cast<std::size_t>(size())));
  }
  void barrier() { group_->barrier(); }
  void broadcast(float* data, std::size_t count, int root) {
    group_->broadcast(std::span(data, count), root);
  }
  void all_to_all(const float* in, float* out, std::size_t count) {
    const std::size_t total = count * static_cast<std::size_t>(size());
    group_->all_to_all(std::span(in, total), std::span(out, total));
  }
  void reduce(float* data, std::size_t count, int root) {
    group_->reduce(std::span(data, count), rlx::ReduceOp::sum, root);
  }
  void gather(const float* in, float* out, std::size_t count, int root) {
    group_->gather(std::span(in, count), std::span(out, count * static_cast<std::size_t>(size())),
                   root);
  }
  void send(int peer, const std::byte* data, std::size_t bytes) {
    group_->send_bytes(peer, 1, {data, bytes});
  }
  void recv(int peer, std::byte* data, std::size_t bytes) {
    group_->recv_bytes_into(peer, 1, {data, bytes});
  }
  double max(double value) {
    group_->all_reduce(std::span(&value, 1), rlx::ReduceOp::max);
    return value;
  }

 private:
  std::shared_ptr<rlx::Transport> group_;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    auto group = rlx::init();
    auto options = rlx::bench::parse_sweep_options(argc, argv, "");
    if (options.label.empty()) options.label = "rlx-" + std::string(group->backend());
    RlxComm comm(group);
    rlx::bench::Sweep<RlxComm>(comm, options).run();
    return 0;
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "rlx-bench: %s\n", error.what());
    return 1;
  }
}
