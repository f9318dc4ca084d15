#include "rlx/transport/posted_receives.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

bool is_timeout(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const CollectiveError& error) {
    return error.kind() == ErrorKind::timeout;
  } catch (...) {
    return false;
  }
}

}  // namespace

struct PostedReceives::Impl {
  struct Record {
    std::span<std::byte> into;
    std::size_t element = 1;
    std::shared_ptr<Request::State> state;
  };
  struct Queue {
    std::deque<Record> records;  // the front one completes first
    bool driven = false;         // a caller is receiving the front one
  };

  Impl(Receiver r, Expect e) : receive(std::move(r)), expect(std::move(e)) {}

  // Receives the front record of `key`'s queue (which is not driven) with
  // `lock` released; returns whether it ended (completed, or failed by stop).
  bool drive_front(std::unique_lock<std::mutex>& lock, Key key, bool block);
  // Pops the front record of `key` and finishes it (mutex held).
  void end_front(Key key, std::exception_ptr failure, std::size_t length);
  // Advances the receives of `key` until `state` completed or, without
  // `block`, until the next one cannot.
  void advance(Key key, Request::State& state, bool block);

  const Receiver receive;
  const Expect expect;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<Key, Queue> queues;  // a key is here while it has records
  std::atomic<std::size_t> outstanding{0};
  std::size_t drivers = 0;
  bool stopping = false;
  std::exception_ptr stop_error;
};

bool PostedReceives::Impl::drive_front(std::unique_lock<std::mutex>& lock, Key key, bool block) {
  Queue& queue = queues.at(key);
  queue.driven = true;
  ++drivers;
  const Record front = queue.records.front();
  lock.unlock();
  std::optional<std::size_t> length;
  std::exception_ptr failure;
  try {
    length = receive(key, front.into, front.element, block);
  } catch (...) {
    failure = std::current_exception();
  }
  lock.lock();
  --drivers;
  Queue& same = queues.at(key);  // stop leaves a driven queue in place
  same.driven = false;
  changed.notify_all();
  // stop() failed every other record while this one was tried without
  // waiting, and waits only for drivers: nobody else would end it.
  if (!length && !failure && stopping) failure = stop_error;
  if (!length && !failure) return false;
  end_front(key, failure, length.value_or(0));
  // The peer sent nothing on this key for a whole deadline: the receives
  // queued behind would each wait one more, so a wait() on the n-th would
  // take n deadlines. They fail with the same timeout now.
  if (failure && is_timeout(failure)) {
    while (queues.contains(key)) end_front(key, failure, 0);
  }
  return true;
}

void PostedReceives::Impl::end_front(Key key, std::exception_ptr failure, std::size_t length) {
  auto found = queues.find(key);
  Record front = std::move(found->second.records.front());
  found->second.records.pop_front();
  if (found->second.records.empty()) queues.erase(found);
  outstanding.fetch_sub(1, std::memory_order_acq_rel);
  front.state->finish(std::move(failure), length);
  expect(key, -1);
}

void PostedReceives::Impl::advance(Key key, Request::State& state, bool block) {
  std::unique_lock lock(mutex);
  while (!state.finished()) {
    const auto found = queues.find(key);
    if (found == queues.end()) return;  // completed, or failed by stop
    if (found->second.driven) {
      if (!block) return;
      changed.wait(lock);
      continue;
    }
    const bool self = found->second.records.front().state.get() == &state;
    if (!drive_front(lock, key, block) || self) return;
  }
}

PostedReceives::PostedReceives(Receiver receive, Expect expect)
    : impl_(std::make_shared<Impl>(std::move(receive), std::move(expect))),
      outstanding_(impl_->outstanding) {}

PostedReceives::~PostedReceives() {
  stop(std::make_exception_ptr(std::runtime_error("the transport was destroyed")));
}

Request PostedReceives::post(Key key, std::span<std::byte> into, std::size_t element) {
  auto state = std::make_shared<Request::State>();
  std::lock_guard lock(impl_->mutex);
  if (impl_->stopping) {
    state->finish(impl_->stop_error);
    return Request(state);
  }
  // Held weakly: a request may outlive its transport (stop completed it).
  state->progress = [weak = std::weak_ptr<Impl>(impl_), key](Request::State& self, bool block) {
    if (auto impl = weak.lock()) impl->advance(key, self, block);
  };
  impl_->queues[key].records.push_back({into, element, state});
  impl_->outstanding.fetch_add(1, std::memory_order_acq_rel);
  impl_->expect(key, +1);
  return Request(state);
}

void PostedReceives::complete_posted(Key key) {
  std::unique_lock lock(impl_->mutex);
  for (;;) {
    const auto found = impl_->queues.find(key);
    if (found == impl_->queues.end()) return;
    if (found->second.driven) {
      impl_->changed.wait(lock);
      continue;
    }
    impl_->drive_front(lock, key, true);
  }
}

void PostedReceives::stop(std::exception_ptr error) {
  std::unique_lock lock(impl_->mutex);
  if (!impl_->stopping) {
    impl_->stopping = true;
    impl_->stop_error = error;
    for (auto it = impl_->queues.begin(); it != impl_->queues.end();) {
      auto& records = it->second.records;
      const std::size_t keep = it->second.driven ? 1 : 0;
      while (records.size() > keep) {
        records.back().state->finish(error);
        impl_->expect(it->first, -1);
        records.pop_back();
        impl_->outstanding.fetch_sub(1, std::memory_order_acq_rel);
      }
      it = records.empty() ? impl_->queues.erase(it) : std::next(it);
    }
    impl_->changed.notify_all();
  }
  impl_->changed.wait(lock, [&] { return impl_->drivers == 0; });
}

}  // namespace rlx
