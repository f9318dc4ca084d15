// A handle on a non-blocking operation (Transport's i* calls): wait() blocks
// until it completed and rethrows its error; test() says whether it
// completed without blocking; bytes() says how long the message an irecv
// received was. Copies share one operation. Sends and collectives run in
// the background; a receive advances inside wait() and test() (and blocking
// receives of its peer and tag), so no thread is held for it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>

namespace rlx {

class Request {
 public:
  // What the operation and its waiters share.
  struct State {
    std::mutex mutex;
    std::condition_variable completed;
    bool done = false;
    std::exception_ptr error;
    std::size_t bytes = 0;
    // Set for operations that advance only when asked (posted receives):
    // called without `mutex`, waiting up to the operation's deadline when
    // `block`, else taking only what is already there.
    std::function<void(State& self, bool block)> progress;
    void finish(std::exception_ptr failure, std::size_t transferred = 0);
    bool finished();
  };

  Request() = default;  // an operation that completed already
  explicit Request(std::shared_ptr<State> state) : state_(std::move(state)) {}

  // Blocks until the operation completed; rethrows its error (a
  // CollectiveError, as the blocking call would have thrown). The operation
  // itself has the transport's deadline, so this never waits forever.
  void wait() const;
  // True once the operation completed (then rethrows its error, like wait).
  bool test() const;
  // After wait() or a true test(): for irecv, the length in bytes of the
  // message received; 0 for every other operation.
  std::size_t bytes() const;

 private:
  std::shared_ptr<State> state_;
};

// Waits for every request, in order, even after one failed (their buffers
// must outlive them), then rethrows the first failure (MPI_Waitall).
void wait_all(std::span<const Request> requests);

}  // namespace rlx
