#include "rlx/transport/mailbox.h"

#include <algorithm>

namespace rlx {

namespace {

// Entries of the per-(peer, tag) maps outlive their last message or
// receiver, so a tag in steady use allocates nothing per message. Once a
// map outgrows `sweep_at`, its idle entries go and `sweep_at` becomes twice
// what is left (at least Mailbox::kIdleEntriesKept): a job that uses ever new tags
// keeps a bounded map, at a constant cost per new entry.
template <typename Map, typename IsIdle>
void sweep_idle_entries(Map& map, std::size_t& sweep_at, IsIdle is_idle) {
  if (map.size() <= sweep_at) return;
  std::erase_if(map, [&](const auto& entry) { return is_idle(entry.second); });
  sweep_at = std::max(Mailbox::kIdleEntriesKept, 2 * map.size());
}

thread_local std::optional<std::pair<int, Tag>> counted_receiver;

}  // namespace

Mailbox::CountedReceiver::CountedReceiver(int from, Tag tag) : outer_(counted_receiver) {
  counted_receiver = std::make_pair(from, tag);
}

Mailbox::CountedReceiver::~CountedReceiver() { counted_receiver = outer_; }

Mailbox::WaitingReceiver::WaitingReceiver(Mailbox& mailbox, int from, Tag tag)
    : mailbox_(mailbox), key_(from, tag), counting_(counted_receiver != key_) {
  if (!counting_) return;
  std::lock_guard lock(mailbox_.mutex_);
  mailbox_.count_waiting(key_, +1);
}

void Mailbox::leave_locked(WaitingReceiver* waiting) noexcept {
  if (waiting == nullptr || !waiting->counting_) return;
  waiting->counting_ = false;
  count_waiting(waiting->key_, -1);
}

void Mailbox::WaitingReceiver::leave() noexcept {
  if (!counting_) return;
  counting_ = false;
  std::lock_guard lock(mailbox_.mutex_);
  mailbox_.count_waiting(key_, -1);  // allocates nothing
}

bool Mailbox::deliver(int from, Tag tag, std::vector<std::byte> message, bool awaited) {
  {
    std::lock_guard lock(mutex_);
    if (!awaited && message.size() > byte_cap_ - std::min(held_bytes_, byte_cap_)) return false;
    held_bytes_ += message.size();
    const auto [queue, added] = queues_.try_emplace({from, tag});
    queue->second.push_back(std::move(message));
    if (added)
      sweep_idle_entries(queues_, queues_sweep_at_, [](const auto& q) { return q.empty(); });
    events_.fetch_add(1, std::memory_order_release);
  }
  arrived_.notify_all();
  return true;
}

std::optional<std::vector<std::byte>> Mailbox::pop(int from, Tag tag) {
  auto it = queues_.find(std::make_pair(from, tag));
  if (it == queues_.end() || it->second.empty()) return std::nullopt;
  std::vector<std::byte> message = std::move(it->second.front());
  it->second.pop_front();  // an emptied queue stays for the tag's next message
  held_bytes_ -= message.size();
  return message;
}

bool Mailbox::awaited(int from, Tag tag) const {
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(from, tag);
  const auto waiting = waiting_.find(key);
  if (waiting == waiting_.end()) return false;
  const auto queued = queues_.find(key);
  const std::size_t ahead = queued == queues_.end() ? 0 : queued->second.size();
  return static_cast<std::size_t>(waiting->second) > ahead;
}

int Mailbox::waiting(int from, Tag tag) const {
  std::lock_guard lock(mutex_);
  const auto found = waiting_.find(std::make_pair(from, tag));
  return found == waiting_.end() ? 0 : found->second;
}

void Mailbox::expect(int from, Tag tag, int change) {
  std::lock_guard lock(mutex_);
  count_waiting(std::make_pair(from, tag), change);
}

void Mailbox::count_waiting(std::pair<int, Tag> key, int change) {
  if (change > 0) {
    const auto [count, added] = waiting_.try_emplace(key, 0);
    count->second += change;
    if (added) sweep_idle_entries(waiting_, waiting_sweep_at_, [](int c) { return c <= 0; });
    return;
  }
  // A count at zero stays for the tag's next receiver. This allocates
  // nothing, so it never throws.
  const auto found = waiting_.find(key);
  if (found != waiting_.end()) found->second = std::max(0, found->second + change);
}

std::optional<std::vector<std::byte>> Mailbox::take(int from, Tag tag, Clock::time_point deadline,
                                                    Pump* pump, WaitingReceiver* waiting) {
  std::unique_lock lock(mutex_);
  const auto key = std::make_pair(from, tag);
  const bool counted = waiting != nullptr || counted_receiver == key;
  if (!counted) count_waiting(key, +1);
  struct Leave {
    Mailbox& mailbox;
    std::pair<int, Tag> key;
    bool counted;
    ~Leave() {
      if (!counted) mailbox.count_waiting(key, -1);
    }
  } leave{*this, key, counted};  // runs with the lock held: declared after it
  bool spun = false;
  for (;;) {
    if (auto message = pop(from, tag)) {
      leave_locked(waiting);
      return message;
    }
    if (auto error = failure_for(from)) std::rethrow_exception(error);
    if (!spun) {
      // Once per take: a receive that outlasts the spin sleeps.
      spun = true;
      const auto seen = events_.load(std::memory_order_acquire);
      lock.unlock();
      {
        // Destroyed in reverse: the pump stops (it may report a failure,
        // which takes the lock) before the lock is taken again, also when
        // pump() throws, which then leaves with the lock held as it came.
        struct Relock {
          std::unique_lock<std::mutex>& lock;
          ~Relock() { lock.lock(); }
        } relock{lock};
        struct StopPump {
          Pump* pump;
          ~StopPump() {
            if (pump) pump->stop();
          }
        } stop_pump{pump};
        spin_.until([&] {
          if (pump) pump->pump();
          return events_.load(std::memory_order_acquire) != seen;
        });
      }
      continue;  // what arrived while the lock was free was notified to nobody
    }
    if (arrived_.wait_until(lock, deadline) == std::cv_status::timeout &&
        Clock::now() >= deadline) {
      return std::nullopt;
    }
  }
}

std::optional<std::vector<std::byte>> Mailbox::try_take(int from, Tag tag,
                                                        WaitingReceiver* waiting) {
  std::lock_guard lock(mutex_);
  if (auto message = pop(from, tag)) {
    leave_locked(waiting);
    return message;
  }
  if (auto error = failure_for(from)) std::rethrow_exception(error);
  return std::nullopt;
}

void Mailbox::fail(int peer, std::exception_ptr error) {
  {
    std::lock_guard lock(mutex_);
    if (peer < 0) {
      if (!global_failure_) global_failure_ = std::move(error);
    } else if (!peer_failures_.contains(peer) && !own_channel_peers_.contains(peer)) {
      peer_failures_[peer] = std::move(error);
    }
    events_.fetch_add(1, std::memory_order_release);
  }
  arrived_.notify_all();
}

void Mailbox::end_reported_by_own_channel(int peer) {
  std::lock_guard lock(mutex_);
  own_channel_peers_.insert(peer);
}

std::size_t Mailbox::held_bytes() const {
  std::lock_guard lock(mutex_);
  return held_bytes_;
}

std::exception_ptr Mailbox::failure_for(int peer) const {
  // The transport's own failure is the root cause: a peer that closed after
  // hearing of it must not hide it behind "peer lost".
  if (global_failure_) return global_failure_;
  if (auto it = peer_failures_.find(peer); it != peer_failures_.end()) return it->second;
  return nullptr;
}

}  // namespace rlx
