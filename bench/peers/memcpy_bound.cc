// memcpy-bound: what memory bandwidth allows an all-reduce of N ranks on one
// host, measured in the same run as the systems it bounds (bench/compare
// --lineup same-host).
//
// An in-place all-reduce must at least read every rank's buffer once and
// write it once; the ranks do so at the same time, sharing the memory
// system. So N processes each memcpy a buffer of the size into another, all
// at once, through the sweep loop every driver shares; the slowest process's
// time is the bound (in cache, at small sizes, it is no bound at all: the
// ranks' cores must also exchange their data).
//
//   memcpy-bound --ranks 2 --op all_sum -b 4 -e 64M --csv
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/sweep_driver.h"

namespace {

constexpr int kMaxRanks = 64;

// What the processes share: a sense-reversing barrier and one value each.
struct Shared {
  std::atomic<int> arrived{0};
  std::atomic<int> generation{0};
  double values[kMaxRanks] = {};
};

class MemcpyComm {
 public:
  static constexpr bool kMovesOnly = true;  // moves bytes; nothing to verify

  MemcpyComm(Shared* shared, int rank, int ranks, std::size_t max_bytes)
      : shared_(shared), rank_(rank), ranks_(ranks), copy_(max_bytes / sizeof(float) + 1, 1.0f) {}
  int rank() { return rank_; }
  int size() { return ranks_; }
  void all_sum(float* data, std::size_t count) {
    std::memcpy(copy_.data(), data, count * sizeof(float));
  }
  void barrier() {
    const int generation = shared_->generation.load(std::memory_order_acquire);
    if (shared_->arrived.fetch_add(1, std::memory_order_acq_rel) == ranks_ - 1) {
      shared_->arrived.store(0, std::memory_order_relaxed);
      shared_->generation.fetch_add(1, std::memory_order_acq_rel);
      return;
    }
    while (shared_->generation.load(std::memory_order_acquire) == generation) {
      std::this_thread::yield();
    }
  }
  double max(double value) {
    shared_->values[rank_] = value;
    barrier();
    double top = value;
    for (int r = 0; r < ranks_; ++r) top = std::max(top, shared_->values[r]);
    barrier();
    return top;
  }
  // Not measured: the bound is the all-reduce's.
  void all_gather(const float*, float*, std::size_t) {}
  void send(int, const std::byte*, std::size_t) {}
  void recv(int, std::byte*, std::size_t) {}

 private:
  Shared* shared_;
  int rank_;
  int ranks_;
  std::vector<float> copy_;  // touched once, here, never per call
};

}  // namespace

int main(int argc, char** argv) {
  int ranks = 2;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--ranks" && i + 1 < argc) {
      ranks = std::atoi(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  auto options =
      rlx::bench::parse_sweep_options(static_cast<int>(rest.size()), rest.data(), "memcpy-bound");
  if (ranks < 1 || ranks > kMaxRanks || options.op != rlx::bench::Op::all_sum) {
    std::fprintf(stderr, "memcpy-bound: --ranks 1..%d, and --op all_sum only\n", kMaxRanks);
    return 2;
  }
  void* memory =
      ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return 1;
  auto* shared = new (memory) Shared{};
  std::vector<pid_t> children;
  int rank = 0;
  for (int r = 1; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      rank = r;
      break;
    }
    children.push_back(pid);
  }
  MemcpyComm comm(shared, rank, ranks, options.max_bytes);
  rlx::bench::Sweep<MemcpyComm>(comm, options).run();
  if (rank != 0) ::_exit(0);
  int failed = 0;
  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed == 0 ? 0 : 1;
}
