// One rank of a job that goes wrong on purpose; tests/faults/faults_test.cc
// (and tests/verbs/verbs_faults_test.cc, over RDMA) run N of these and check
// what each rank reports.
//
//   fault_program mismatch_size   rank 1 all_sums fewer elements than the rest
//   fault_program mismatch_kind   rank 0 enters a barrier, the rest an all_sum
//   fault_program peer_killed     the last rank kills itself mid-loop
//   fault_program recv_timeout    rank 0 waits for a message nobody sends
//   fault_program steady          correct collectives for RLX_STEADY_MS (default 2000)
//                                 or until RLX_STEADY_STOP_FILE exists (strangers
//                                 attack meanwhile), then the peak RSS
//
// Prints "RESULT kind=<error kind> ms=<time to the error>" and exits 0 when
// the expected error (or, for steady, every result) was seen.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include "rlx/rlx.h"

namespace {

using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Runs `body`; reports the CollectiveError it throws; true if its kind is `expected`.
template <class Body>
bool expect_error(rlx::ErrorKind expected, Body body) {
  const auto start = Clock::now();
  try {
    body();
    std::printf("RESULT kind=none ms=%lld\n", ms_since(start));
    return false;
  } catch (const rlx::CollectiveError& error) {
    std::printf("RESULT kind=%s ms=%lld\nMESSAGE %s\n", std::string(name_of(error.kind())).c_str(),
                ms_since(start), error.what());
    return error.kind() == expected;
  }
}

// This process's peak resident memory, from /proc/self/status (VmHWM).
long peak_rss_kib() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::atol(line + 6);
  }
  std::fclose(status);
  return kib;
}

// A test that attacks the job for as long as it takes asks it to stop by
// creating RLX_STEADY_STOP_FILE.
bool stop_requested() {
  const char* stop = std::getenv("RLX_STEADY_STOP_FILE");
  return stop != nullptr && ::access(stop, F_OK) == 0;
}

bool steady(rlx::Transport& group) {
  // Rank 0's peers are all connected once init returned: tell a test that
  // waits to attack the running job, not its setup.
  if (const char* ready = std::getenv("RLX_STEADY_READY_FILE"); ready && group.rank() == 0) {
    if (std::FILE* file = std::fopen(ready, "w")) std::fclose(file);
  }
  const auto start = Clock::now();
  const char* length = std::getenv("RLX_STEADY_MS");
  const long run_ms = length != nullptr ? std::atol(length) : 2000;
  for (int round = 0;; ++round) {
    std::vector<std::int64_t> v(4096 + static_cast<std::size_t>(round % 7), group.rank() + 1);
    group.all_sum(std::span(v));
    const std::int64_t want =
        static_cast<std::int64_t>(group.world_size()) * (group.world_size() + 1) / 2;
    for (auto x : v) {
      if (x != want) return false;
    }
    // Rank 0 decides when to stop, and everyone learns it in the same round.
    std::int32_t keep_going = group.rank() == 0 && ms_since(start) < run_ms && !stop_requested();
    group.all_sum(std::span(&keep_going, 1));
    if (keep_going == 0) {
      std::printf("RESULT kind=none rounds=%d peak_rss_kib=%ld\n", round + 1, peak_rss_kib());
      return true;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  // RLX_BACKEND picks the transport (tcp unless set): the same cases run over verbs.
  auto group = rlx::init("any", /*strict=*/true);
  const int rank = group->rank(), last = group->world_size() - 1;
  std::vector<float> data(rank == 1 && mode == "mismatch_size" ? 1000 : 2000, 1.0f);
  bool ok = false;
  if (mode == "mismatch_size") {
    ok = expect_error(rlx::ErrorKind::mismatch, [&] { group->all_sum(std::span(data)); });
  } else if (mode == "mismatch_kind") {
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] { rank == 0 ? group->barrier() : group->all_sum(std::span(data)); });
  } else if (mode == "peer_killed") {
    ok = expect_error(rlx::ErrorKind::peer_lost, [&] {
      std::vector<float> big(1 << 18, 1.0f);
      for (int i = 0;; ++i) {
        if (rank == last && i == 5) ::raise(SIGKILL);
        group->all_sum(std::span(big));
      }
    });
  } else if (mode == "recv_timeout") {
    ok = rank != 0 || expect_error(rlx::ErrorKind::timeout, [&] { group->recv_bytes(1, 77); });
    // A receive that timed out leaves the transport usable. The others enter
    // the barrier half a deadline after rank 0's receive gave up, inside the
    // barrier's own deadline on both sides.
    if (rank != 0) std::this_thread::sleep_for(group->timeout() * 3 / 2);
    group->barrier();
  } else if (mode == "steady") {
    ok = steady(*group);
  } else {
    std::fprintf(stderr, "fault_program: unknown mode '%s'\n", mode.c_str());
  }
  std::fflush(stdout);
  return ok ? 0 : 1;
}
