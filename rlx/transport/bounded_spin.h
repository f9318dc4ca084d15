// How a thread that waits for another process waits: it retries without
// sleeping for a short bound, then blocks. A peer with a core of its own
// answers a small message sooner than the kernel wakes a sleeping thread on
// this kind of VM; when ranks outnumber cores (launch_env::ranks_share_cores)
// every retry yields instead, so the peer with work to do runs and the
// answer is still picked up without a wakeup. docs/BENCHMARKS.md has the
// figures behind the bound ("4 ranks on 2 cores", "Point-to-point latency").
#pragma once

#include <chrono>
#include <thread>

namespace rlx {

struct BoundedSpin {
  std::chrono::microseconds bound{0};  // 0: block at once
  bool yield = false;

  // Tries `ready` at least once, and again until it returns true (then
  // true) or the bound passes (then false, and the caller blocks).
  template <class Ready>
  bool until(Ready&& ready) const {
    const auto end = std::chrono::steady_clock::now() + bound;
    for (;;) {
      if (ready()) return true;
      if (std::chrono::steady_clock::now() >= end) return false;
      if (yield) std::this_thread::yield();
    }
  }
};

// The spin of a thread that makes progress itself (it reads the sockets it
// waits on), on a host that runs `ranks_on_host` ranks.
BoundedSpin bounded_spin_for(int ranks_on_host);

// The spin of a thread that waits for its own process's progress thread to
// deliver: it always yields, or, sharing a core with that thread, it would
// keep it from running until the bound passed.
BoundedSpin bounded_spin_for_delivery();

}  // namespace rlx
