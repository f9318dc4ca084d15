// Polling without burning a core: how rlx waits on MPI requests and probes.
//
// MPI's nonblocking calls only tell whether something is done; waiting means
// asking again. A few immediate retries keep latency low when the answer is
// about to arrive; after that the thread yields, then sleeps for periods
// growing from tens of microseconds to a millisecond, because with several
// ranks per core a spinning rank steals the time its peers need to answer.
#pragma once

#include <chrono>

namespace rlx::mpi {

class Backoff {
 public:
  // Waits a little before the next retry; each call may wait longer than the last.
  void pause();

 private:
  static constexpr int kSpins = 64;    // immediate retries
  static constexpr int kYields = 256;  // retries after sched_yield
  static constexpr std::chrono::microseconds kFirstSleep{20};
  static constexpr std::chrono::microseconds kLongestSleep{1000};

  int retries_ = 0;
  std::chrono::microseconds sleep_ = kFirstSleep;
};

}  // namespace rlx::mpi
