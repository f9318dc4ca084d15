#include "rlx/backends/tcp/peer_channel.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <string>

#include <poll.h>
#include <sys/socket.h>

#include "rlx/transport/wire.h"

namespace rlx::tcp {

namespace {

// Bytes read per turn at most: a peer that streams without pause must not
// keep the progress thread from its other connections, nor a spinning
// receiver from its deadline. What is left is reported again at once.
constexpr std::size_t kBytesPerTurn = 4 * 1024 * 1024;

}  // namespace

// Reads frames off the connection. Whoever holds `mutex` reads: the
// progress thread when the poller reports the socket readable, or a
// receiver that claimed the connection while it spins (PeerChannel::Pump),
// which leaves the socket unarmed in the poller meanwhile. The progress
// thread never waits for the lock: finding it taken, it drops the report,
// and the holder arms the socket again once it has let go (after, so the
// report that arming may cause cannot find the lock still taken).
struct PeerChannel::Reader {
  Reader(ChannelPoller& watch, int socket, int peer_rank, Mailbox& box, Hooks h,
         std::atomic<bool>& closed, PeerChannel& owner)
      : poller(watch),
        fd(socket),
        peer(peer_rank),
        mailbox(box),
        hooks(std::move(h)),
        peer_closed(closed),
        channel(owner) {}

  // On the progress thread.
  void on_readable() {
    std::unique_lock lock(mutex, std::try_to_lock);
    if (!lock.owns_lock()) return;
    struct Release {
      Reader& reader;
      std::unique_lock<std::mutex>& lock;
      ~Release() { reader.release(lock); }
    } release_after{*this, lock};
    read_available();
  }

  bool claim() {
    std::unique_lock lock(mutex, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    if (!ended) {
      try {
        poller.disarm(fd, &channel);
      } catch (const CollectiveError& error) {
        ended = true;
        lock.unlock();
        hooks.fail(std::make_exception_ptr(error), /*tell_peers=*/true);
        return false;
      }
    }
    lock.release();  // held until release()
    return true;
  }

  void release() noexcept {
    std::unique_lock lock(mutex, std::adopt_lock);
    release(lock);
  }

  void release(std::unique_lock<std::mutex>& lock) noexcept {
    const bool more = !ended;
    lock.unlock();
    if (!more) return;
    try {
      poller.arm(fd, &channel);
    } catch (const CollectiveError& error) {
      try {
        hooks.fail(std::make_exception_ptr(error), /*tell_peers=*/true);
      } catch (...) {
        // Out of memory while reporting: the transport's next wait times out.
      }
    }
  }

  // Reads frames until the socket has no more bytes, the stream ended or
  // this turn's bytes are used up (mutex held). A frame whose bytes are all
  // in is handed on whatever the budget: with no bytes left in the socket,
  // nothing would report it again.
  // Returns whether it read anything.
  bool read_available() {
    std::size_t turn = 0;
    while (!ended) {
      const std::span<std::byte> into =
          frame ? target.subspan(got) : std::span(header).subspan(got);
      if (!into.empty()) {
        if (turn >= kBytesPerTurn) return true;
        const ssize_t n = ::recv(fd, into.data(), std::min(into.size(), kBytesPerTurn - turn), 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return turn > 0;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          on_stream_end(n == 0 ? "End of file" : std::strerror(errno));
          return true;
        }
        got += static_cast<std::size_t>(n);
        turn += static_cast<std::size_t>(n);
        if (got < (frame ? target.size() : header.size())) continue;
      }
      got = 0;
      if (frame) {
        const wire::FrameHeader h = *frame;
        frame.reset();
        on_payload(h);
        // The receiver has its message: what follows waits for the next
        // reader, who counts the waiting receivers as they are then.
        if (landing && landing->length) return true;
      } else {
        on_header();
      }
    }
    return turn > 0;
  }

  void on_header() {
    wire::FrameHeader h;
    try {
      h = wire::decode(header);
    } catch (const wire::DecodeError& error) {
      return violation(error.what());
    }
    switch (h.kind) {
      case wire::FrameKind::message:
        return on_message_header(h);
      case wire::FrameKind::abort:
        if (h.length > wire::kMaxAbortTextBytes) return violation("oversized abort message");
        return expect_payload(h);
      case wire::FrameKind::close:
        ended = true;  // nothing may follow a close
        peer_closed = true;
        mailbox.fail(peer,
                     std::make_exception_ptr(peer_shut_down(hooks.site("recv_bytes", peer), peer)));
        if (hooks.peer_closed) hooks.peer_closed();
        return;
      case wire::FrameKind::collective:
        return violation("a collective frame arrived on the point-to-point connection");
      case wire::FrameKind::ping:
        if (h.length != 0) return violation("a ping with a payload");
        channel.answer_ping();
        return;
      case wire::FrameKind::pong:
        if (h.length != 0) return violation("a pong with a payload");
        ++channel.pongs_;
        return;
    }
  }

  void on_message_header(const wire::FrameHeader& h) {
    if (h.tag > kMaxTag) return violation("message tag " + std::to_string(h.tag) + " is too large");
    if (h.sequence != expected_sequence) {
      return violation("message " + std::to_string(h.sequence) + " arrived where " +
                       std::to_string(expected_sequence) + " was due");
    }
    ++expected_sequence;
    // A receiver already waiting takes a message of any length; only bytes
    // held for nobody count against the cap.
    awaited = mailbox.awaited(peer, h.tag);
    if (!awaited && h.length > mailbox.byte_cap()) {
      return fail_all(ErrorKind::resource_exhausted,
                      "rank " + std::to_string(peer) + " sent a " + format_bytes(h.length) +
                          " message (tag " + std::to_string(h.tag) +
                          ") that no recv_bytes waited for; at most RLX_UNEXPECTED_BYTES = " +
                          format_bytes(mailbox.byte_cap()) + " can be held for later");
    }
    if (landing && h.tag == landing->tag && !landing->length) {
      if (message_fits(h.length, landing->into.size(), landing->element)) {
        target = landing->into.first(h.length);
        into_landing = true;
        frame = h;
        return;
      }
      // The mailbox holds it for the receiver, and what follows must not
      // overtake it.
      landing = nullptr;
    }
    expect_payload(h);
  }

  // The receiver that claimed the connection stops reading: the rest of a
  // message on its way into the receiver's buffer goes into one of ours
  // (mutex held, by the claim).
  void detach_landing() noexcept {
    landing = nullptr;
    if (!into_landing) return;
    into_landing = false;
    if (ended) {  // the rest never comes
      frame.reset();
      target = {};
      return;
    }
    const std::size_t length = target.size();
    try {
      payload = mailbox.spare_buffers().take(length);
      std::copy_n(target.begin(), got, payload.begin());
      target = payload;
    } catch (const std::exception&) {
      frame.reset();
      target = {};
      try {
        fail_all(ErrorKind::resource_exhausted, "cannot allocate " + format_bytes(length) +
                                                    " for a message from rank " +
                                                    std::to_string(peer));
      } catch (...) {
        ended = true;  // out of memory while reporting: the next wait times out
      }
    }
  }

  void expect_payload(const wire::FrameHeader& h) {
    try {
      payload = h.kind == wire::FrameKind::message ? mailbox.spare_buffers().take(h.length)
                                                   : std::vector<std::byte>(h.length);
      target = payload;
    } catch (const std::exception&) {  // bad_alloc, or a length above max_size()
      return fail_all(ErrorKind::resource_exhausted, "cannot allocate " + format_bytes(h.length) +
                                                         " for a message from rank " +
                                                         std::to_string(peer));
    }
    frame = h;
  }

  void on_payload(const wire::FrameHeader& h) {
    if (h.kind == wire::FrameKind::abort) {
      ended = true;
      const std::string_view text(reinterpret_cast<const char*>(payload.data()), payload.size());
      hooks.fail(std::make_exception_ptr(
                     wire::relayed_failure(h, text, peer, hooks.site("(remote failure)", -1))),
                 /*tell_peers=*/false);
      return;
    }
    if (into_landing) {
      into_landing = false;
      landing->length = h.length;
      target = {};
      return;
    }
    // One of the landing's tag that the mailbox holds (begun before the
    // claim, or too long) comes first: nothing after it may land.
    if (landing && h.tag == landing->tag) landing = nullptr;
    if (!mailbox.deliver(peer, h.tag, std::move(payload), awaited)) {
      return fail_all(ErrorKind::resource_exhausted,
                      "messages received but not yet passed to recv_bytes exceed "
                      "RLX_UNEXPECTED_BYTES = " +
                          format_bytes(mailbox.byte_cap()));
    }
    payload = {};
  }

  void on_stream_end(const std::string& why) {
    ended = true;
    if (peer_closed) return;
    fail_all(ErrorKind::peer_lost, "rank " + std::to_string(peer) +
                                       " closed its connection without shutting down (" + why +
                                       "): it exited or crashed");
  }

  void violation(const std::string& what) {
    fail_all(ErrorKind::protocol_violation, "from rank " + std::to_string(peer) + ": " + what);
  }

  void fail_all(ErrorKind kind, const std::string& detail) {
    ended = true;
    hooks.fail(
        std::make_exception_ptr(CollectiveError(
            kind, hooks.site("receive", peer), detail,
            kind == ErrorKind::peer_lost ? "rank " + std::to_string(peer) + "'s own output says why"
                                         : "")),
        /*tell_peers=*/kind != ErrorKind::peer_lost);
  }

  ChannelPoller& poller;
  const int fd;
  const int peer;
  Mailbox& mailbox;
  Hooks hooks;
  std::atomic<bool>& peer_closed;
  PeerChannel& channel;  // outlives the reader's handlers: the io thread stops first
  std::mutex mutex;      // guards what follows
  bool ended = false;    // nothing more is read: a close, an abort, an error
  wire::EncodedHeader header{};
  std::optional<wire::FrameHeader> frame;  // its header is in, its payload due
  bool awaited = false;                    // the frame's receiver was waiting for it
  std::vector<std::byte> payload;
  std::span<std::byte> target;  // where the payload goes: `payload`, or a landing's buffer
  // The receiver that claimed the connection, and where its message goes.
  struct Landing {
    Tag tag;
    std::span<std::byte> into;
    std::size_t element;
    std::optional<std::size_t> length;  // set once its message is in
  };
  Landing* landing = nullptr;
  bool into_landing = false;  // the frame's payload goes into the landing's buffer
  std::size_t got = 0;        // bytes of the header, or of the payload, read so far
  std::uint64_t expected_sequence = 0;
};

PeerChannel::PeerChannel(ChannelPoller& poller, UniqueFd fd, int peer, Mailbox& mailbox,
                         Hooks hooks)
    : fd_(std::move(fd)),
      poller_(poller),
      reader_(std::make_unique<Reader>(poller, fd_.get(), peer, mailbox, std::move(hooks),
                                       peer_closed_, *this)) {}

PeerChannel::~PeerChannel() = default;

void PeerChannel::on_readable(void* channel) {
  static_cast<PeerChannel*>(channel)->reader_->on_readable();
}

PeerChannel::Pump::Pump(PeerChannel* channel) : channel_(channel) {}

void PeerChannel::Pump::pump() {
  if (channel_ == nullptr) return;
  if (!claimed_) claimed_ = channel_->reader_->claim();
  if (claimed_) channel_->reader_->read_available();
}

void PeerChannel::Pump::stop() noexcept {
  if (!claimed_) return;
  claimed_ = false;
  channel_->reader_->release();
}

std::optional<PeerChannel::Received> PeerChannel::receive_into(Tag tag, std::span<std::byte> into,
                                                               std::size_t element,
                                                               Deadline deadline, BoundedSpin spin,
                                                               int wake_fd,
                                                               Mailbox::WaitingReceiver& waiting) {
  Reader& reader = *reader_;
  Mailbox& mailbox = reader.mailbox;
  std::optional<Received> received;
  // The progress thread may be reading: wait for it as a receiver waits
  // for a delivery, then leave the reading to it.
  const bool claimed = bounded_spin_for_delivery().until([&] {
    if (auto queued = mailbox.try_take(reader.peer, tag, &waiting)) received = std::move(*queued);
    return received || reader.claim();
  });
  if (received || !claimed) return received;

  Reader::Landing landing{.tag = tag, .into = into, .element = element, .length = std::nullopt};
  reader.landing = &landing;
  read_by_receiver_ = true;
  struct Release {
    PeerChannel& channel;
    std::optional<Received>& received;
    Mailbox::WaitingReceiver& waiting;
    ~Release() {
      if (received) waiting.leave();
      channel.read_by_receiver_ = false;
      channel.reader_->detach_landing();
      channel.reader_->release();
    }
  } release{*this, received, waiting};
  // A message queued before the claim (the progress thread delivered it)
  // or one that did not fit the buffer is the mailbox's, whole; only the
  // first is there without a frame of this tag read since.
  if (auto queued = mailbox.try_take(reader.peer, tag, &waiting)) {
    received = std::move(*queued);
    return received;
  }
  bool streaming = false;  // the last read got bytes of this receiver's message
  auto progress = [&] {
    const bool read = reader.read_available();
    streaming = read && (reader.into_landing || landing.length);
    if (!read) return reader.ended;
    if (landing.length) {
      received = *landing.length;
    } else if (auto queued = mailbox.try_take(reader.peer, tag, &waiting)) {
      received = std::move(*queued);
    }
    return received || reader.ended;
  };
  try {
    // The spin starts again while bytes of the message keep coming (it
    // streams in at the rate the sender writes it); once none came for its
    // bound, the receiver sleeps in poll until more do.
    while (Clock::now() < deadline) {
      if (!spin.until([&] { return progress() || streaming; })) {
        wait_ready(fd_.get(), POLLIN, deadline, wake_fd);
      } else if (received || reader.ended) {
        break;
      }
    }
  } catch (const IoError&) {
    // The deadline, or the transport failed: the mailbox says which.
  }
  return received;
}

std::optional<PeerChannel::StalledMessage> PeerChannel::stalled_message() const {
  // Never waits: a receiver may hold the connection until its own
  // deadline. A report the progress thread dropped while this held the
  // lock is made again by arming the socket after letting go, as every
  // holder does.
  std::unique_lock lock(reader_->mutex, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;
  std::optional<StalledMessage> stalled;
  if (reader_->frame && reader_->frame->kind == wire::FrameKind::message) {
    stalled = StalledMessage{
        .tag = reader_->frame->tag, .length = reader_->frame->length, .arrived = reader_->got};
  }
  reader_->release(lock);
  return stalled;
}

void PeerChannel::start() {
  poller_.add(fd_.get(), this);
  poller_.arm(fd_.get(), this);
}

void PeerChannel::send(wire::FrameHeader header, std::span<const std::byte> payload,
                       Deadline deadline, int wake_fd) {
  {
    std::lock_guard lock(send_mutex_);
    if (header.kind == wire::FrameKind::message) header.sequence = send_sequence_++;
    header.length = payload.size();
    const auto encoded = wire::encode(header);
    const std::span<const std::byte> parts[] = {encoded, payload};
    send_all(fd_.get(), parts, deadline, wake_fd);
  }
  if (pong_owed_.load()) answer_ping();  // a ping arrived while this frame went out
}

void PeerChannel::ping(Deadline deadline) {
  send({.kind = wire::FrameKind::ping}, {}, deadline, -1);
}

void PeerChannel::answer_ping() {
  pong_owed_ = true;
  std::unique_lock lock(send_mutex_, std::try_to_lock);
  // Whoever holds the lock answers once its frame is out (send() checks
  // after unlocking), so the progress thread never waits for a long send.
  if (!lock.owns_lock() || !pong_owed_.exchange(false)) return;
  try {
    // A header fits any socket buffer: this does not wait in practice.
    send_all(fd_.get(), wire::encode({.kind = wire::FrameKind::pong}),
             Clock::now() + std::chrono::seconds(1), -1);
  } catch (const IoError&) {
    // The peer that asked is gone; its connection's end reports that.
  }
}

void PeerChannel::shutdown_send() {
  std::lock_guard lock(send_mutex_);
  ::shutdown(fd_.get(), SHUT_WR);
}

}  // namespace rlx::tcp
