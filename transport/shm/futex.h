// Waiting on a word of shared memory across processes: a short bounded spin
// (yielding the core when ranks share cores), then the kernel's futex wait
// with the caller's deadline. With 4-8 ranks on 2 cores, spinning longer
// would only take the core from the rank being waited for.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "transport/socket_io.h"

namespace rlx::shm {

struct SpinPolicy {
  std::chrono::microseconds spin{20};  // polls before sleeping in the kernel
  bool yield = false;                  // yield the core on each poll (ranks share cores)
};

// Returns once `word` no longer holds `expected` (true) or at `deadline`
// (false). `word` may live in memory shared with other processes.
bool wait_while_equal(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                      Deadline deadline, SpinPolicy policy = {});

// Wakes every process waiting on `word` (call after changing it).
void wake_all(std::atomic<std::uint32_t>& word);

}  // namespace rlx::shm
