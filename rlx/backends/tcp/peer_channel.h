// The point-to-point connection to one peer (connection 0 of the pair).
//
// The progress thread reads frames as they arrive, whether or not anyone is
// receiving, and a receiver spinning for a message reads them itself:
// messages go to the Mailbox, an abort or an unexpected end of stream trips
// the transport's FailureLatch. Callers send on their own thread,
// one frame at a time under a lock.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "rlx/backends/tcp/channel_poller.h"
#include "rlx/transport/bounded_spin.h"
#include "rlx/transport/frame.h"
#include "rlx/transport/mailbox.h"
#include "rlx/transport/socket_io.h"

namespace rlx::tcp {

class PeerChannel {
 public:
  // What the channel reports to its transport, on the progress thread.
  struct Hooks {
    // The transport cannot go on; `tell_peers` when this rank found the
    // cause (a peer's abort, or its lost connection, the others learn anyway).
    std::function<void(std::exception_ptr, bool tell_peers)> fail;
    std::function<ErrorSite(std::string_view operation, int peer)> site;
    std::function<void()> peer_closed;  // a clean close or end of stream
  };

  // Reads on the progress thread when `poller` reports `fd` readable: the
  // poller's Ready must be PeerChannel::on_readable.
  PeerChannel(ChannelPoller& poller, UniqueFd fd, int peer, Mailbox& mailbox, Hooks hooks);
  ~PeerChannel();
  PeerChannel(const PeerChannel&) = delete;
  PeerChannel& operator=(const PeerChannel&) = delete;

  // Starts reading on the progress thread.
  void start();
  static void on_readable(void* channel);

  // A receiver spinning for a message from this peer reads the connection
  // itself (when no other thread is reading it), so the message needs no
  // wakeup of the progress thread; stop() hands reading back to it.
  class Pump final : public Mailbox::Pump {
   public:
    explicit Pump(PeerChannel* channel);  // null: nothing to read
    void pump() override;
    void stop() noexcept override;

   private:
    PeerChannel* channel_;
    bool claimed_ = false;
  };
  // Receives the next message with `tag` for a receiver that has a buffer
  // for it: while no other thread reads the connection, the receiver reads
  // it itself (waiting in poll() for its bytes) and a message that fits
  // `into` (whole `element`s) goes from the socket straight into it, with
  // no copy and no other thread's wakeup; its length is returned. Other
  // frames go where the progress thread would put them. A message the
  // mailbox already holds, or one that does not fit, is returned whole
  // (the mailbox's). nullopt at `deadline`, or when another thread reads
  // the connection (the caller then waits in the mailbox). Rethrows the
  // peer's failure. The caller counts as a waiting receiver of the mailbox
  // (`waiting`) from before it calls this, so what the progress thread
  // reads meanwhile is not held as early; once the message is in, `waiting`
  // is left before the connection goes back to the progress thread, so
  // what follows it is. `spin` is how long it reads without sleeping first;
  // `wake_fd`, readable, ends the wait (the transport failed).
  using Received = std::variant<std::size_t, std::vector<std::byte>>;
  std::optional<Received> receive_into(Tag tag, std::span<std::byte> into, std::size_t element,
                                       Deadline deadline, BoundedSpin spin, int wake_fd,
                                       Mailbox::WaitingReceiver& waiting);

  // True while a receiver in receive_into() reads the connection.
  bool read_by_receiver() const { return read_by_receiver_.load(); }

  // The message this connection is in the middle of, if any: for the
  // timeout of a receiver whose peer stopped halfway through sending. Not
  // for a thread that holds the connection (Pump, receive_into); nullopt
  // also while another thread reads it.
  struct StalledMessage {
    Tag tag;
    std::uint64_t length;
    std::uint64_t arrived;
  };
  std::optional<StalledMessage> stalled_message() const;

  // Sends one frame; message frames get their sequence number here, under the
  // send lock, so numbers and stream order agree. Throws IoError.
  void send(wire::FrameHeader header, std::span<const std::byte> payload, Deadline deadline,
            int wake_fd);
  // Stops sending: no more frames after this.
  void shutdown_send();
  bool peer_has_closed() const { return peer_closed_.load(); }

  // Liveness: ping() asks the peer's progress thread to answer; pongs()
  // counts the answers received. A peer whose process is stopped or hung
  // (its progress thread does not run) never answers, while one that is
  // merely blocked in a collective does at once. Throws IoError.
  void ping(Deadline deadline);
  std::uint64_t pongs() const { return pongs_.load(); }

 private:
  struct Reader;
  UniqueFd fd_;
  ChannelPoller& poller_;
  std::unique_ptr<Reader> reader_;
  std::mutex send_mutex_;
  std::uint64_t send_sequence_ = 0;  // guarded by send_mutex_
  std::atomic<bool> peer_closed_{false};
  std::atomic<bool> read_by_receiver_{false};
  std::atomic<std::uint64_t> pongs_{0};
  // A ping that arrived while another thread held the send lock: the holder
  // answers it when its frame is out, so the progress thread never waits.
  std::atomic<bool> pong_owed_{false};
  void answer_ping();
};

}  // namespace rlx::tcp
