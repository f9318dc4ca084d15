// A handle on an operation that runs in the background (Transport's i*
// calls): wait() blocks until it completed and rethrows its error; test()
// says whether it completed without blocking. Copies share one operation.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>

namespace rlx {

class Request {
 public:
  // What the operation and its waiters share.
  struct State {
    std::mutex mutex;
    std::condition_variable completed;
    bool done = false;
    std::exception_ptr error;
    void finish(std::exception_ptr failure);
  };

  Request() = default;  // an operation that completed already
  explicit Request(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Blocks until the operation completed; rethrows its error (a
  // CollectiveError, as the blocking call would have thrown). The operation
  // itself has the transport's deadline, so this never waits forever.
  void wait() const;
  // True once the operation completed (then rethrows its error, like wait).
  bool test() const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace rlx
