// Non-blocking receives (Transport::irecv) as records, not threads.
//
// An irecv is queued here per (peer, tag) and completed by whichever caller
// advances it: its Request's wait() (receiving with the transport's
// deadline), its test() (receiving only a message that is already there), or
// a blocking receive of the same peer and tag, which first completes the
// receives posted before it. One caller at a time drives a key, so the
// receives of a key complete in posting order. No thread waits for a message
// nobody asked for yet, so any number of receives may be outstanding: the
// rule of MPI without an asynchronous progress thread, where a request
// advances inside the library's calls. Meanwhile the backend holds what
// arrives for a posted receive without counting it against
// RLX_UNEXPECTED_BYTES (the Expect hook).
#pragma once

#include <atomic>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>

#include "rlx/transport/request.h"

namespace rlx {

class PostedReceives {
 public:
  struct Key {
    int peer = 0;
    std::uint32_t tag = 0;
    auto operator<=>(const Key&) const = default;
  };
  // Receives the next message of `key` into `into` (whole `element`s) and
  // returns its length: with `block`, waiting up to the transport's
  // deadline; without, only when one is already there (nullopt if not).
  // Throws as the blocking receive does.
  using Receiver = std::function<std::optional<std::size_t>(Key key, std::span<std::byte> into,
                                                            std::size_t element, bool block)>;
  // `change` receives of `key` were posted (+1) or ended (-1).
  using Expect = std::function<void(Key key, int change)>;

  PostedReceives(Receiver receive, Expect expect);
  ~PostedReceives();
  PostedReceives(const PostedReceives&) = delete;
  PostedReceives& operator=(const PostedReceives&) = delete;

  // Queues a receive of `key` into `into`; it completes when advanced.
  Request post(Key key, std::span<std::byte> into, std::size_t element);
  // Runs `work` (a blocking receive of `key`) on this thread, after the
  // receives of `key` posted before it. With nothing posted it costs one
  // atomic load.
  template <class Work>
  void run_after_posted(Key key, Work&& work);
  // Fails every receive no caller is advancing with `error`, and waits for
  // those being advanced (each ends by its deadline). Idempotent; first in a
  // backend's destructor, while the backend still works.
  void stop(std::exception_ptr error);

 private:
  struct Impl;
  // Completes the posted receives of `key` until none is left or none can
  // complete; returns once nothing of `key` is posted.
  void complete_posted(Key key);

  std::shared_ptr<Impl> impl_;
  std::atomic<std::size_t>& outstanding_;
};

template <class Work>
void PostedReceives::run_after_posted(Key key, Work&& work) {
  if (outstanding_.load(std::memory_order_acquire) != 0) complete_posted(key);
  work();
}

}  // namespace rlx
