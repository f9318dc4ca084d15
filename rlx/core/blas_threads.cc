#include "rlx/core/blas_threads.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include <cblas.h>
#include <sched.h>

namespace rlx {

std::string fit_blas_threads(int ranks_here) {
  for (const char* name : {"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"}) {
    if (const char* value = std::getenv(name); value && *value) {
      return "OpenBLAS threads: " + std::to_string(openblas_get_num_threads()) + " (" + name + "=" +
             value + ")";
    }
  }
  const int host = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t mine;
  CPU_ZERO(&mine);
  const int allowed = sched_getaffinity(0, sizeof(mine), &mine) == 0 ? CPU_COUNT(&mine) : host;
  const int share = allowed < host ? allowed : std::max(1, host / std::max(1, ranks_here));
  // Never more than it has: fewer may be the program's own choice.
  const int before = openblas_get_num_threads();
  if (share >= before) {
    return "OpenBLAS threads: " + std::to_string(before) + " (already at most this rank's share)";
  }
  openblas_set_num_threads(share);
  return "OpenBLAS threads: " + std::to_string(share) +
         (allowed < host ? " (the CPUs this rank is bound to)"
                         : " (" + std::to_string(host) + " CPUs shared by " +
                               std::to_string(ranks_here) + " ranks of this host)");
}

}  // namespace rlx
