// Whole programs for the MPI transport's life-cycle cases, run under mpirun:
//
//   mpi_program user_init           the program starts MPI (MPI_THREAD_MULTIPLE) before
//                                   rlx::init, uses both, and finalises MPI itself
//   mpi_program user_init_single    the program starts MPI with MPI_THREAD_SINGLE:
//                                   rlx::init must refuse with a clear error
//   mpi_program collective_timeout  rank 1 never joins rank 0's all_sum: the
//                                   watchdog must report it and abort the job
//   mpi_program frozen              the last rank stops itself (SIGSTOP) inside a loop
//                                   of all_sums: the others' watchdogs must name it
//
// Each prints "<mode>: rank R ok" when its checks pass and exits non-zero otherwise.
#include <chrono>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include "rlx/rlx.h"

namespace {

int failures = 0;

void check(bool ok, std::string_view what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "FAILED: %.*s\n", static_cast<int>(what.size()), what.data());
}

int world_rank() {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int user_init() {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  check(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE provided");
  auto group = rlx::init();
  check(group->backend() == "mpi", "backend is mpi");
  const int n = group->world_size();
  const int rank = group->rank();
  check(rank == world_rank(), "rlx's rank is MPI_COMM_WORLD's");

  // rlx and the program's own MPI calls, interleaved.
  std::vector<std::int64_t> values(1000, rank + 1);
  group->all_sum(std::span(values));
  std::int64_t mine = rank + 1;
  std::int64_t total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  check(values[999] == total && total == static_cast<std::int64_t>(n) * (n + 1) / 2, "sums");
  const std::byte message[3] = {std::byte{1}, std::byte{2}, std::byte(rank)};
  group->send_bytes((rank + 1) % n, 4, message);
  const auto got = group->recv_bytes((rank + n - 1) % n, 4);
  check(got.size() == 3 && got[2] == std::byte((rank + n - 1) % n), "message from the left");
  group->barrier();

  MPI_Finalize();
  int finalized = 0;
  MPI_Finalized(&finalized);
  check(finalized == 1, "finalised by the program");
  // The transport was closed by MPI_Finalize: later calls fail clearly.
  try {
    group->barrier();
    check(false, "a barrier after MPI_Finalize throws");
  } catch (const rlx::CollectiveError& error) {
    check(error.kind() == rlx::ErrorKind::backend_unavailable, error.what());
  }
  if (failures == 0) std::printf("user_init: rank %d ok\n", rank);
  return failures == 0 ? 0 : 1;
}

int user_init_single() {
  MPI_Init(nullptr, nullptr);
  const int rank = world_rank();
  try {
    rlx::init();
    check(false, "rlx::init refuses MPI_THREAD_SINGLE");
  } catch (const rlx::CollectiveError& error) {
    check(error.kind() == rlx::ErrorKind::backend_unavailable, "kind backend_unavailable");
    if (rank == 0) std::printf("%s\n", error.what());
  }
  MPI_Finalize();
  if (failures == 0) std::printf("user_init_single: rank %d ok\n", rank);
  return failures == 0 ? 0 : 1;
}

int collective_timeout() {
  auto group = rlx::init();
  if (group->rank() == 1) {
    // Never joins; the watchdog on rank 0 aborts the job long before this ends.
    std::this_thread::sleep_for(group->timeout() * 30);
    return 0;
  }
  std::int32_t value = 1;
  group->all_sum(std::span(&value, 1));
  std::fprintf(stderr, "FAILED: rank %d's all_sum returned without rank 1\n", group->rank());
  return 1;
}

int frozen() {
  auto group = rlx::init();
  const int last = group->world_size() - 1;
  std::vector<float> values(64, 1.0f);
  for (int i = 0;; ++i) {
    if (group->rank() == last && i == 5) {
      const pid_t self = ::getpid();
      if (::fork() == 0) {  // so nothing waits on the frozen rank for ever
        ::sleep(12);
        ::kill(self, SIGKILL);
        ::_exit(0);
      }
      ::raise(SIGSTOP);
    }
    group->all_sum(std::span(values));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "user_init") return user_init();
    if (mode == "user_init_single") return user_init_single();
    if (mode == "collective_timeout") return collective_timeout();
    if (mode == "frozen") return frozen();
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "%s: %s\n", mode.c_str(), error.what());
    return 1;
  }
  std::fprintf(stderr, "usage: mpi_program user_init|user_init_single|collective_timeout|frozen\n");
  return 2;
}
