// Messages that arrived before anyone asked for them, queued per (peer, tag).
//
// Every transport that receives in the background (the singleton's self-sends,
// TCP's progress thread) parks early messages here. Receivers wait with a
// deadline; a lost peer fails its receivers at once instead of letting them
// run into the deadline. The bytes held for nobody are capped, so a peer that
// sends far ahead of its receiver gets an error rather than exhausting
// memory; a message a receiver is already waiting for is not held for
// nobody, and may be of any length.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "rlx/transport/bounded_spin.h"
#include "rlx/transport/spare_buffers.h"
#include "rlx/transport/transport.h"

namespace rlx {

class Mailbox {
 public:
  using Clock = std::chrono::steady_clock;

  // `spin`: how take() waits before it sleeps (none by default).
  explicit Mailbox(std::size_t byte_cap, BoundedSpin spin = {})
      : byte_cap_(byte_cap), spin_(spin) {}

  // Queues a message. Returns false (and queues nothing) when it would take
  // the held bytes above the cap, unless `awaited` (see awaited()).
  [[nodiscard]] bool deliver(int from, Tag tag, std::vector<std::byte> message,
                             bool awaited = false);
  // True when a receiver is waiting in take() for the next message from
  // `from` with `tag` (more receivers wait than messages are queued): that
  // message is not early, so the cap does not apply to it.
  bool awaited(int from, Tag tag) const;
  // Receivers counted as waiting for `from` and `tag`: inside take(), or
  // posted (expect).
  int waiting(int from, Tag tag) const;
  // Receives posted without a waiting thread (Transport::irecv) count as
  // waiting receivers: `change` is +1 when one is posted, -1 when it ended.
  void expect(int from, Tag tag, int change);

  // Takes the oldest message from `from` with `tag`. Returns nullopt when the
  // deadline passes first; rethrows the failure recorded for `from`. The
  // caller counts as a waiting receiver meanwhile, unless this thread is
  // inside a CountedReceiver of that peer and tag.
  // What a spinning take() does meanwhile (see the constructor): it reads
  // what is on its way to this mailbox itself, so the message arrives
  // without another thread's wakeup. stop() is called once the spin ends.
  class Pump {
   public:
    virtual void pump() = 0;
    virtual void stop() noexcept = 0;

   protected:
    ~Pump() = default;
  };
  // `waiting`: the caller counts already, through it; it is left as the
  // message is taken, under the same lock, so the message behind it is
  // never taken for awaited.
  class WaitingReceiver;
  std::optional<std::vector<std::byte>> take(int from, Tag tag, Clock::time_point deadline,
                                             Pump* pump = nullptr,
                                             WaitingReceiver* waiting = nullptr);
  // The same without waiting (and without reading the clock): for receivers
  // that drive their transport's progress themselves while they wait.
  std::optional<std::vector<std::byte>> try_take(int from, Tag tag,
                                                 WaitingReceiver* waiting = nullptr);

  // From now on, receives from `peer` (or from everyone, when peer < 0) throw
  // `error` once the messages already queued from it are taken. A failure of
  // everyone (the transport's own) wins over a peer's.
  void fail(int peer, std::exception_ptr error);
  // Messages from `peer` come through a channel that reports the peer's end
  // itself, after reading its last message (shared memory): fail(peer, ...)
  // from the network, whose close may overtake them, is ignored for it.
  void end_reported_by_own_channel(int peer);

  // While one lives, this thread's take() of (from, tag) is a posted
  // receive's, which expect() counts already: counted twice, the message
  // behind it would pass as awaited and slip past the cap.
  class CountedReceiver {
   public:
    CountedReceiver(int from, Tag tag);
    ~CountedReceiver();
    CountedReceiver(const CountedReceiver&) = delete;
    CountedReceiver& operator=(const CountedReceiver&) = delete;

   private:
    std::optional<std::pair<int, Tag>> outer_;
  };

  // Counts this thread as a receiver waiting for `from` and `tag` while it
  // lives, as take() does meanwhile (and as it, not inside a
  // CountedReceiver of that peer and tag): for receivers that wait for
  // their message elsewhere than in take().
  class WaitingReceiver {
   public:
    WaitingReceiver(Mailbox& mailbox, int from, Tag tag);
    ~WaitingReceiver() { leave(); }
    WaitingReceiver(const WaitingReceiver&) = delete;
    WaitingReceiver& operator=(const WaitingReceiver&) = delete;
    // Stops counting before the end of the scope: the receiver has its message.
    void leave() noexcept;

   private:
    friend class Mailbox;
    Mailbox& mailbox_;
    std::pair<int, Tag> key_;
    bool counting_;  // this one counts (and has not left)
  };

  std::size_t held_bytes() const;
  std::size_t byte_cap() const { return byte_cap_; }

  // Where a transport that fills messages itself gets their buffers, and
  // where a receiver that copied a message out gives its buffer back.
  SpareBuffers& spare_buffers() { return spare_buffers_; }

  // (peer, tag) entries kept without a message or receiver, at least.
  static constexpr std::size_t kIdleEntriesKept = 1024;

 private:
  std::exception_ptr failure_for(int peer) const;
  std::optional<std::vector<std::byte>> pop(int from, Tag tag);  // mutex_ held
  void count_waiting(std::pair<int, Tag> key, int change);       // mutex_ held
  void leave_locked(WaitingReceiver* waiting) noexcept;          // mutex_ held

  const std::size_t byte_cap_;
  const BoundedSpin spin_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::pair<int, Tag>, std::deque<std::vector<std::byte>>> queues_;
  std::map<std::pair<int, Tag>, int> waiting_;      // receivers inside take(), and expected
  std::size_t queues_sweep_at_ = kIdleEntriesKept;  // see sweep_idle_entries in mailbox.cc
  std::size_t waiting_sweep_at_ = kIdleEntriesKept;
  std::map<int, std::exception_ptr> peer_failures_;
  std::set<int> own_channel_peers_;
  std::exception_ptr global_failure_;
  std::size_t held_bytes_ = 0;
  // Counts deliveries and failures: what a spinning take() watches.
  std::atomic<std::uint64_t> events_{0};
  SpareBuffers spare_buffers_;
};

}  // namespace rlx
