// Where non-blocking sends (Transport::isend) run.
//
// Each runs on a worker thread of this stream. Sends of one key (a peer and a
// tag) run one after another in the order they were posted, so messages
// between a pair of ranks with one tag stay FIFO; those of different keys run
// at once, each pending key on a worker of its own (workers start on demand,
// up to kMaxWorkers; further keys wait for one). A send never waits for its
// receiver (transport.h), so a worker is never held by a peer that has not
// asked yet. A blocking send of a key with sends still posted runs after
// them, so one thread's calls keep the order it made them in. With nothing
// posted, a blocking send costs one atomic load here. Transport::isend
// sends small messages on its caller's thread when their key is idle, so
// only large ones come here. Receives are not run here: posted_receives.h.
#pragma once

#include <atomic>
#include <compare>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "rlx/transport/request.h"

namespace rlx {

class PointToPointStream {
 public:
  // What orders sends: the ones of one key run in posting order.
  struct Key {
    int peer = 0;
    std::uint32_t tag = 0;
    auto operator<=>(const Key&) const = default;
  };
  // This many keys make progress at once.
  static constexpr std::size_t kMaxWorkers = 64;

  PointToPointStream() = default;
  ~PointToPointStream();
  PointToPointStream(const PointToPointStream&) = delete;
  PointToPointStream& operator=(const PointToPointStream&) = delete;

  // Runs `work` in the background after the operations of `key` posted
  // before it. `work` returns what Request::bytes() reports.
  Request post(Key key, std::function<std::size_t()> work);
  // True when no send of `key` is posted or running (one atomic load when
  // none of any key is).
  bool idle(Key key) {
    return unfinished_.load(std::memory_order_acquire) == 0 || !has_posted(key);
  }
  // Runs `work` on this thread, after the operations of `key` posted before.
  template <class Work>
  void run_after_posted(Key key, Work&& work);
  // Fails what has not started with `error` and waits for the running
  // operations (each ends by its deadline). Idempotent; first in a backend's
  // destructor, while the backend still works.
  void stop(std::exception_ptr error);

 private:
  struct Job {
    std::function<std::size_t()> work;
    std::shared_ptr<Request::State> state;
  };
  struct Queue {
    std::deque<Job> jobs;  // the front one runs once a worker took the key
    bool running = false;
  };
  bool has_posted(Key key);
  void serve();
  // Runs the jobs of `key` until its queue is empty; mutex_ held on entry and exit.
  void drain(std::unique_lock<std::mutex>& lock, Key key);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, Queue> queues_;  // a key is here while it has jobs
  std::deque<Key> ready_;        // keys with jobs and no worker
  std::vector<std::thread> workers_;
  std::size_t idle_ = 0;
  std::atomic<std::size_t> unfinished_{0};
  bool stopping_ = false;
  std::exception_ptr stop_error_;
};

template <class Work>
void PointToPointStream::run_after_posted(Key key, Work&& work) {
  if (idle(key)) {
    work();
    return;
  }
  post(key, [&] {
    work();
    return std::size_t{0};
  }).wait();
}

}  // namespace rlx
