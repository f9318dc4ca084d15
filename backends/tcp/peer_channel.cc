#include "backends/tcp/peer_channel.h"

#include <exception>
#include <string>

#include <sys/socket.h>

#include "transport/asio.h"
#include "transport/wire.h"

namespace rlx::tcp {
namespace asio = boost::asio;

namespace {

// An abort message longer than this is a protocol violation.
constexpr std::uint64_t kMaxAbortBytes = 64 * 1024;

}  // namespace

struct PeerChannel::Reader : std::enable_shared_from_this<Reader> {
  Reader(asio::io_context& io, int fd, int peer_rank, Mailbox& box, Hooks h,
         std::atomic<bool>& closed, PeerChannel& owner)
      : stream(io, fd),
        peer(peer_rank),
        mailbox(box),
        hooks(std::move(h)),
        peer_closed(closed),
        channel(owner) {}

  void read_header() {
    asio::async_read(stream, asio::buffer(header),
                     [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
                       if (ec) return self->on_stream_end(ec);
                       self->on_header();
                     });
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
        if (h.length > kMaxAbortBytes) return violation("oversized abort message");
        return read_payload(h);
      case wire::FrameKind::close:
        peer_closed = true;
        fail_receivers(ErrorKind::peer_lost,
                       "rank " + std::to_string(peer) + " has shut down its transport");
        if (hooks.peer_closed) hooks.peer_closed();
        return;  // nothing may follow a close
      case wire::FrameKind::collective:
        return violation("a collective frame arrived on the point-to-point connection");
      case wire::FrameKind::ping:
        if (h.length != 0) return violation("a ping with a payload");
        channel.answer_ping();
        return read_header();
      case wire::FrameKind::pong:
        if (h.length != 0) return violation("a pong with a payload");
        ++channel.pongs_;
        return read_header();
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
    const bool awaited = mailbox.awaited(peer, h.tag);
    if (!awaited && h.length > mailbox.byte_cap()) {
      return fail_all(ErrorKind::resource_exhausted,
                      "rank " + std::to_string(peer) + " sent a " + format_bytes(h.length) +
                          " message (tag " + std::to_string(h.tag) +
                          ") that no recv_bytes waited for; at most RLX_UNEXPECTED_BYTES = " +
                          format_bytes(mailbox.byte_cap()) + " can be held for later");
    }
    read_payload(h, awaited);
  }

  void read_payload(const wire::FrameHeader& h, bool awaited = false) {
    try {
      payload.assign(h.length, std::byte{0});
    } catch (const std::exception&) {  // bad_alloc, or a length above max_size()
      return fail_all(ErrorKind::resource_exhausted, "cannot allocate " + format_bytes(h.length) +
                                                         " for a message from rank " +
                                                         std::to_string(peer));
    }
    asio::async_read(
        stream, asio::buffer(payload),
        [self = shared_from_this(), h, awaited](boost::system::error_code ec, std::size_t) {
          if (ec) return self->on_stream_end(ec);
          self->on_payload(h, awaited);
        });
  }

  void on_payload(const wire::FrameHeader& h, bool awaited) {
    if (h.kind == wire::FrameKind::abort) {
      const std::string_view text(reinterpret_cast<const char*>(payload.data()), payload.size());
      hooks.fail(std::make_exception_ptr(
                     wire::relayed_failure(h, text, peer, hooks.site("(remote failure)", -1))),
                 /*tell_peers=*/false);
      return;
    }
    if (!mailbox.deliver(peer, h.tag, std::move(payload), awaited)) {
      return fail_all(ErrorKind::resource_exhausted,
                      "messages received but not yet passed to recv_bytes exceed "
                      "RLX_UNEXPECTED_BYTES = " +
                          format_bytes(mailbox.byte_cap()));
    }
    read_header();
  }

  void on_stream_end(const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted || peer_closed) return;
    fail_all(ErrorKind::peer_lost, "rank " + std::to_string(peer) +
                                       " closed its connection without shutting down (" +
                                       ec.message() + "): it exited or crashed");
  }

  void violation(const std::string& what) {
    fail_all(ErrorKind::protocol_violation, "from rank " + std::to_string(peer) + ": " + what);
  }

  void fail_receivers(ErrorKind kind, const std::string& detail) {
    mailbox.fail(peer, std::make_exception_ptr(
                           CollectiveError(kind, hooks.site("recv_bytes", peer), detail)));
  }

  void fail_all(ErrorKind kind, const std::string& detail) {
    hooks.fail(
        std::make_exception_ptr(CollectiveError(
            kind, hooks.site("receive", peer), detail,
            kind == ErrorKind::peer_lost ? "rank " + std::to_string(peer) + "'s own output says why"
                                         : "")),
        /*tell_peers=*/kind != ErrorKind::peer_lost);
  }

  asio::posix::stream_descriptor stream;
  int peer;
  Mailbox& mailbox;
  Hooks hooks;
  std::atomic<bool>& peer_closed;
  wire::EncodedHeader header{};
  std::vector<std::byte> payload;
  PeerChannel& channel;  // outlives the reader's handlers: the io thread stops first
  std::uint64_t expected_sequence = 0;
};

PeerChannel::PeerChannel(asio::io_context& io, UniqueFd fd, int peer, Mailbox& mailbox, Hooks hooks)
    : fd_(fd.get()) {
  reader_ = std::make_shared<Reader>(io, fd.release(), peer, mailbox, std::move(hooks),
                                     peer_closed_, *this);
}

PeerChannel::~PeerChannel() = default;

void PeerChannel::start() {
  asio::post(reader_->stream.get_executor(), [reader = reader_] { reader->read_header(); });
}

void PeerChannel::send(wire::FrameHeader header, std::span<const std::byte> payload,
                       Deadline deadline, int wake_fd) {
  {
    std::lock_guard lock(send_mutex_);
    if (header.kind == wire::FrameKind::message) header.sequence = send_sequence_++;
    header.length = payload.size();
    const auto encoded = wire::encode(header);
    const std::span<const std::byte> parts[] = {encoded, payload};
    send_all(fd_, parts, deadline, wake_fd);
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
    send_all(fd_, wire::encode({.kind = wire::FrameKind::pong}),
             Clock::now() + std::chrono::seconds(1), -1);
  } catch (const IoError&) {
    // The peer that asked is gone; its connection's end reports that.
  }
}

void PeerChannel::shutdown_send() {
  std::lock_guard lock(send_mutex_);
  ::shutdown(fd_, SHUT_WR);
}

}  // namespace rlx::tcp
