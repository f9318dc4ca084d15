// The order of one transport's collectives, when some run in the background.
//
// Every rank must run its collectives in the same order. Non-blocking ones
// (Transport::iall_reduce, ...) queue here and run one at a time on the
// stream's thread, started on first use; a blocking collective issued while
// some are queued or running waits its turn, then runs on its caller's
// thread. With nothing queued, a blocking collective runs at once, as if
// the stream did not exist (one uncontended lock).
#pragma once

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
  void finish_inline();

  enum class Running { nothing, inline_call, job };

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  Running running_ = Running::nothing;
  bool stopping_ = false;
  std::exception_ptr stop_error_;
  std::thread thread_;
};

template <class Work>
bool CollectiveStream::run_in_order(Work&& work) {
  {
    std::unique_lock lock(mutex_);
    if (running_ == Running::inline_call) return false;
    if (running_ == Running::job || !queue_.empty()) {
      lock.unlock();
      submit(std::function<void()>(std::forward<Work>(work))).wait();
      return true;
    }
    running_ = Running::inline_call;
  }
  struct Finish {
    CollectiveStream& stream;
    ~Finish() { stream.finish_inline(); }
  } finish{*this};
  work();
  return true;
}

}  // namespace rlx
