#include "rlx/backends/mpi/backoff.h"

#include <algorithm>
#include <thread>

#include <sched.h>

namespace rlx::mpi {

void Backoff::pause() {
  ++retries_;
  if (retries_ <= kSpins) return;
  if (retries_ <= kSpins + kYields) {
    sched_yield();
    return;
  }
  std::this_thread::sleep_for(sleep_);
  sleep_ = std::min(sleep_ * 2, kLongestSleep);
}

}  // namespace rlx::mpi
