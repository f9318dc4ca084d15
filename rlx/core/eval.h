// Evaluation of lazy arrays: synchronously with eval(), or on the runtime's
// worker thread with async_eval().
//
// Each array is computed at most once, whoever asks first. eval() and
// async_eval() may be called from several threads on overlapping graphs: a
// thread that needs an array another thread is computing waits for it. A
// primitive that throws marks its array failed; every later eval of that
// array, or of anything built on it, rethrows the same exception.
#pragma once

#include <concepts>
#include <future>
#include <span>

#include "rlx/core/array.h"

namespace rlx {

// Computes `arrays` and whatever they depend on, in dependency order, and
// returns when all have data. Rethrows the first exception a primitive threw.
void eval(std::span<const Array> arrays);

template <std::same_as<Array>... Rest>
void eval(const Array& first, const Rest&... rest) {
  const Array arrays[] = {first, rest...};
  eval(std::span<const Array>(arrays));
}

// A pending async_eval(). Copies share the same evaluation.
class AsyncEval {
 public:
  // Blocks until the evaluation finished; rethrows its exception if it failed.
  void wait() const { done_.get(); }
  // True once wait() would not block.
  bool ready() const;

 private:
  friend AsyncEval async_eval(std::span<const Array> arrays);
  explicit AsyncEval(std::shared_future<void> done) : done_(std::move(done)) {}

  std::shared_future<void> done_;
};

// Queues the evaluation of `arrays` on the runtime's single worker thread and
// returns at once. eval() of the same arrays afterwards waits for them (and
// computes nothing twice). Primitives run by the worker may block; waiting on
// an AsyncEval from inside a primitive would deadlock the worker. At exit the
// worker finishes what was queued before the program ends.
AsyncEval async_eval(std::span<const Array> arrays);

template <std::same_as<Array>... Rest>
AsyncEval async_eval(const Array& first, const Rest&... rest) {
  const Array arrays[] = {first, rest...};
  return async_eval(std::span<const Array>(arrays));
}

}  // namespace rlx
