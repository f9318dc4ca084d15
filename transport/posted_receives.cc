#include "transport/posted_receives.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>

namespace rlx {

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
  const bool completed = length.has_value() || failure;
  if (completed) {
    front.state->finish(failure, length.value_or(0));
    expect(key, -1);
  }
  lock.lock();
  --drivers;
  Queue& same = queues.at(key);  // stop leaves a driven queue in place
  same.driven = false;
  // stop() failed every other record while this one was tried without
  // waiting, and waits only for drivers: nobody else would end it.
  const bool stopped = !completed && stopping;
  if (stopped) {
    front.state->finish(stop_error);
    expect(key, -1);
  }
  if (completed || stopped) {
    same.records.pop_front();
    outstanding.fetch_sub(1, std::memory_order_acq_rel);
    if (same.records.empty()) queues.erase(key);
  }
  changed.notify_all();
  return completed || stopped;
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
