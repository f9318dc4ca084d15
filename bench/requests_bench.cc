// What a group and its requests cost a rank: threads, memory per
// outstanding irecv, and the time of split(). Run under a launcher:
//
//   rlxrun -n 2 build/release/bench/requests-bench [requests] [groups]
//   RLX_SHM=0 rlxrun -n 4 build/release/bench/requests-bench
//
// Each rank posts `requests` irecvs (default 10,000) from its left
// neighbour over 1,000 tags before any send, then as many isends to its
// right, and waits for all; it reports the threads and resident memory
// before and after posting. Then it splits the world `groups` times
// (default 16, every rank in each) and reports the median split() time and
// the threads with every group open (requests 0: splits only; groups 0:
// requests only). Rank 0 prints one line per figure.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "rlx/rlx.h"

namespace {

using Clock = std::chrono::steady_clock;

long threads_now() {
  return std::distance(std::filesystem::directory_iterator("/proc/self/task"),
                       std::filesystem::directory_iterator{});
}

long resident_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void outstanding_receives(rlx::Transport& group, std::size_t count) {
  const int n = group.world_size(), me = group.rank();
  const int left = (me + n - 1) % n, right = (me + 1) % n;
  std::vector<std::int64_t> inbox(count, -1), outbox(count);
  std::vector<rlx::Request> receives, sends;
  receives.reserve(count);
  sends.reserve(count);
  group.barrier();
  const long threads_before = threads_now(), kib_before = resident_kib();
  const auto start = Clock::now();
  for (std::size_t i = 0; i < count; ++i) {
    receives.push_back(
        group.irecv(left, static_cast<rlx::Tag>(i % 1000), std::span(inbox).subspan(i, 1)));
  }
  const double post_ms = ms_since(start);
  const long threads_posted = threads_now(), kib_posted = resident_kib();
  for (std::size_t i = 0; i < count; ++i) {
    outbox[i] = static_cast<std::int64_t>(i);
    sends.push_back(
        group.isend(right, static_cast<rlx::Tag>(i % 1000), std::span(outbox).subspan(i, 1)));
  }
  rlx::wait_all(receives);
  rlx::wait_all(sends);
  const double total_ms = ms_since(start);
  for (std::size_t i = 0; i < count; ++i) {
    if (inbox[i] != static_cast<std::int64_t>(i)) {
      std::fprintf(stderr, "rank %d: receive %zu got %lld\n", me, i,
                   static_cast<long long>(inbox[i]));
      std::exit(1);
    }
  }
  if (me == 0) {
    std::printf("ranks %d, %s: %zu irecvs posted in %.1f ms, all sent and received in %.1f ms\n", n,
                group.path_to(right).c_str(), count, post_ms, total_ms);
    std::printf("threads before posting %ld, with them posted %ld\n", threads_before,
                threads_posted);
    std::printf("resident memory per outstanding irecv: %.0f bytes\n",
                1024.0 * static_cast<double>(kib_posted - kib_before) / static_cast<double>(count));
  }
}

void splits(const std::shared_ptr<rlx::Transport>& world, int count) {
  std::vector<std::shared_ptr<rlx::Transport>> groups;
  std::vector<double> times;
  const long threads_before = threads_now();
  for (int i = 0; i < count; ++i) {
    world->barrier();
    const auto start = Clock::now();
    groups.push_back(world->split(0));
    times.push_back(ms_since(start));
  }
  world->barrier();
  std::sort(times.begin(), times.end());
  if (world->rank() == 0) {
    std::printf("split() median %.2f ms (min %.2f, max %.2f) over %d splits\n",
                times[times.size() / 2], times.front(), times.back(), count);
    std::printf("threads with 1 group %ld, with %d more groups %ld\n", threads_before, count,
                threads_now());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t requests = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000;
  const int groups = argc > 2 ? std::atoi(argv[2]) : 16;
  if (argc > 3 || groups < 0 || (argc > 1 && argv[1][0] == '-')) {
    std::fprintf(
        stderr,
        "usage: requests-bench [REQUESTS (default 10000)] [GROUPS (default 16, 0: no splits)]\n");
    return 2;
  }
  const auto world = rlx::init();
  if (requests > 0) outstanding_receives(*world, requests);
  if (groups > 0) splits(world, groups);
  return 0;
}
