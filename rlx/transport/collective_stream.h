// The order of one transport's collectives, when some run in the background.
//
// Every rank must run its collectives in the same order. Non-blocking ones
// (Transport::iall_reduce, ...) queue here and run one at a time on the
// stream's thread, started on first use; a blocking collective issued while
// some are queued or running waits its turn, then runs on its caller's
// thread. With nothing queued, a blocking collective runs at once, as if
// the stream did not exist: its turn is an atomic flag, not a lock, since
// a small collective on shared memory costs little more than the lock did.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "rlx/transport/request.h"

namespace rlx {

class CollectiveStream {
 public:
  CollectiveStream() = default;
  ~CollectiveStream();
  CollectiveStream(const CollectiveStream&) = delete;
  CollectiveStream& operator=(const CollectiveStream&) = delete;

  // Queues `work` after every collective issued before it.
  Request submit(std::function<void()> work);
  // Runs `work` on this thread after every collective issued before it.
  // Returns false, without running it, while another thread's blocking
  // collective runs (collectives of two threads have no order across ranks).
  template <class Work>
  bool run_in_order(Work&& work);
  // Fails what has not started with `error`, waits for the running one (it
  // ends by its own deadline) and ends the thread. Idempotent; first in a
  // backend's destructor, while the backend still works.
  void stop(std::exception_ptr error);

 private:
  struct Job {
    std::function<void()> work;
    std::shared_ptr<Request::State> state;
  };
  void run_jobs();
  // Whether a blocking collective runs now on its caller's thread, waits
  // for the queue, or is refused (another thread's blocking call runs).
  enum class Turn { now, after_queue, refused };
  Turn take_turn();
  void finish_inline();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  // Read without the lock by take_turn and finish_inline. Sequentially
  // consistent: when a job is queued as an inline call takes its turn,
  // either the call sees the job (and queues behind it) or the job thread
  // sees the call (and waits for it).
  std::atomic<std::size_t> jobs_{0};  // queued or running
  std::atomic<bool> inline_running_{false};
  bool stopping_ = false;
  std::exception_ptr stop_error_;
  std::thread thread_;
};

template <class Work>
bool CollectiveStream::run_in_order(Work&& work) {
  switch (take_turn()) {
    case Turn::refused:
      return false;
    case Turn::after_queue:
      submit(std::function<void()>(std::forward<Work>(work))).wait();
      return true;
    case Turn::now:
      break;
  }
  struct Finish {
    CollectiveStream& stream;
    ~Finish() { stream.finish_inline(); }
  } finish{*this};
  work();
  return true;
}

}  // namespace rlx
