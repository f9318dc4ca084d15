#include "rlx/transport/transport.h"

#include <cstring>

#include "rlx/transport/collective_call.h"
#include "rlx/transport/mailbox.h"

namespace rlx {

std::string_view name_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::prod:
      return "prod";
    case ReduceOp::min:
      return "min";
    case ReduceOp::max:
      return "max";
  }
  return "invalid";
}

Transport::Transport(int rank, int world_size, std::string backend,
                     std::chrono::milliseconds timeout)
    : rank_(rank),
      world_size_(world_size),
      backend_(std::move(backend)),
      timeout_(timeout),
      posted_receives_(
          [this](PostedReceives::Key key, std::span<std::byte> into, std::size_t element,
                 bool block) -> std::optional<std::size_t> {
            if (block) {
              const Mailbox::CountedReceiver counted(key.peer, key.tag);
              return receive_checked(key.peer, key.tag, into, element);
            }
            return try_receive_checked(key.peer, key.tag, into, element);
          },
          [this](PostedReceives::Key key, int change) {
            do_expect_messages(key.peer, key.tag, change);
          }) {
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "create transport"},
                          "rank " + std::to_string(rank_) + " is outside a world of size " +
                              std::to_string(world_size_));
  }
  // The world group, unless split() is making this one (CallRecord::SplitScope).
  std::vector<int> members(static_cast<std::size_t>(world_size_));
  for (int r = 0; r < world_size_; ++r) members[static_cast<std::size_t>(r)] = r;
  record_group_ = CallRecord::process().add_group("world", rank_, std::move(members));
}

Transport::~Transport() { CallRecord::process().close_group(record_group_); }

std::string Transport::path_to(int peer) const {
  check_peer(peer, "path_to");
  return peer == rank_ ? "self" : backend_;
}

ErrorSite Transport::site(std::string_view operation, int peer, std::string sizes) const {
  return {.rank = rank_,
          .world_size = world_size_,
          .peer = peer,
          .operation = std::string(operation),
          .sizes = std::move(sizes)};
}

ErrorSite Transport::receive_site(int from, Tag tag) const {
  return site("recv_bytes", from, "tag " + std::to_string(tag));
}

void Transport::check_peer(int peer, std::string_view operation) const {
  if (peer < 0 || peer >= world_size_) {
    throw CollectiveError(ErrorKind::invalid_argument, site(operation),
                          "peer rank " + std::to_string(peer) + " does not exist",
                          "ranks are 0.." + std::to_string(world_size_ - 1));
  }
}

void Transport::check_tag(Tag tag, std::string_view operation) const {
  if (tag > kMaxTag) {
    throw CollectiveError(
        ErrorKind::invalid_argument, site(operation),
        "tag " + std::to_string(tag) + " is above the largest user tag " + std::to_string(kMaxTag));
  }
}

CollectiveError Transport::refused(std::string_view operation) const {
  return CollectiveError(ErrorKind::invalid_argument, site(operation),
                         "another collective is running on this transport",
                         "collectives on one transport must not run concurrently: issue them "
                         "from one thread (or give each thread its own group)");
}

Request Transport::submit_collective(const RecordedCall& call, std::function<void()> work) {
  return stream_.submit([this, call, work = std::move(work)] {
    CollectiveScope running(*this, call.operation);
    run_recorded(record_group_, call, recorded_collectives_++, work);
  });
}

CollectiveCall Transport::next_call(CollectiveKind kind, ReduceOp op, Dtype dtype,
                                    std::uint64_t count, int root) {
  return {.kind = kind,
          .op = op,
          .dtype = dtype,
          .count = count,
          .sequence = calls_numbered_++,
          .root = root};
}

void Transport::stop_background_work() {
  const auto closed = std::make_exception_ptr(
      CollectiveError(ErrorKind::backend_unavailable, site("close"),
                      "the transport was closed before this non-blocking operation started"));
  stream_.stop(closed);
  p2p_stream_.stop(closed);
  posted_receives_.stop(closed);
}

void Transport::check_payload(std::span<const std::byte> payload,
                              std::string_view operation) const {
  if (payload.data() == nullptr && !payload.empty()) {
    throw CollectiveError(ErrorKind::invalid_argument,
                          site(operation, -1, format_bytes(payload.size())),
                          "the payload is null but its length is not 0");
  }
}

void Transport::check_elements(std::string_view operation, const void* data, std::size_t count,
                               Dtype dtype) const {
  if (!is_valid_dtype(static_cast<std::uint8_t>(dtype))) {
    throw CollectiveError(
        ErrorKind::invalid_argument, site(operation, -1, std::to_string(count) + " elements"),
        "dtype value " + std::to_string(static_cast<int>(dtype)) + " is not a Dtype",
        "use one of rlx::Dtype's enumerators");
  }
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(count, size_of(dtype), &bytes)) [[unlikely]] {
    throw CollectiveError(
        ErrorKind::invalid_argument,
        site(operation, -1, std::to_string(count) + " x " + std::string(name_of(dtype))),
        "the byte size of " + std::to_string(count) + " elements does not fit in size_t");
  }
  if (data == nullptr && count > 0) {
    throw CollectiveError(ErrorKind::invalid_argument,
                          site(operation, -1, describe_elements(count, dtype)),
                          "the buffer is null");
  }
}

void Transport::check_op(std::string_view operation, ReduceOp op) const {
  if (op != ReduceOp::sum && op != ReduceOp::prod && op != ReduceOp::min && op != ReduceOp::max) {
    throw CollectiveError(
        ErrorKind::invalid_argument, site(operation),
        "reduce op value " + std::to_string(static_cast<int>(op)) + " is not a ReduceOp",
        "use sum, prod, min or max");
  }
}

void Transport::send_bytes(int to, Tag tag, std::span<const std::byte> payload) {
  check_send(to, tag, payload, "send_bytes");
  run_recorded(record_group_,
               {.operation = "send", .count = payload.size(), .peer = to, .tag = tag}, 0, [&] {
                 p2p_stream_.run_after_posted({.peer = to, .tag = tag},
                                              [&] { do_send_bytes(to, tag, payload); });
               });
}

std::vector<std::byte> Transport::recv_bytes(int from, Tag tag) {
  check_peer(from, "recv_bytes");
  check_tag(tag, "recv_bytes");
  std::vector<std::byte> message;
  run_recorded(record_group_, {.operation = "recv", .peer = from, .tag = tag}, 0, [&] {
    posted_receives_.run_after_posted({.peer = from, .tag = tag}, [&] {
      auto kept = take_kept(from, tag);
      message = kept ? std::move(*kept) : do_recv_bytes(from, tag);
    });
  });
  return message;
}

std::size_t Transport::recv_bytes_into(int from, Tag tag, std::span<std::byte> into) {
  return receive_into(from, tag, into, 1);
}

std::size_t Transport::receive_into(int from, Tag tag, std::span<std::byte> into,
                                    std::size_t element) {
  check_receive(from, tag, into, "recv_bytes_into");
  std::size_t length = 0;
  run_recorded(record_group_, {.operation = "recv", .count = into.size(), .peer = from, .tag = tag},
               0, [&] {
                 posted_receives_.run_after_posted({.peer = from, .tag = tag}, [&] {
                   length = receive_checked(from, tag, into, element);
                 });
               });
  return length;
}

std::size_t Transport::receive_checked(int from, Tag tag, std::span<std::byte> into,
                                       std::size_t element) {
  if (auto kept = take_kept(from, tag))
    return place_or_keep(from, tag, std::move(*kept), into, element);
  return do_recv_bytes_into(from, tag, into, element);
}

std::optional<std::size_t> Transport::try_receive_checked(int from, Tag tag,
                                                          std::span<std::byte> into,
                                                          std::size_t element) {
  if (auto kept = take_kept(from, tag))
    return place_or_keep(from, tag, std::move(*kept), into, element);
  return do_try_recv_bytes_into(from, tag, into, element);
}

void Transport::do_expect_messages(int /*from*/, Tag /*tag*/, int /*change*/) {}

Request Transport::isend(int to, Tag tag, std::span<const std::byte> payload) {
  check_send(to, tag, payload, "isend");
  CallRecord::process().posted(
      record_group_, {.operation = "isend", .count = payload.size(), .peer = to, .tag = tag});
  const PointToPointStream::Key key{.peer = to, .tag = tag};
  if (payload.size() <= kEagerSendBytes && p2p_stream_.idle(key)) {
    // A send never waits for its receiver: a small one is a copy into the
    // ring or the socket, cheaper here than a hop to a worker thread.
    auto state = std::make_shared<Request::State>();
    try {
      do_send_bytes(to, tag, payload);
      state->finish(nullptr);
    } catch (...) {
      state->finish(std::current_exception());
    }
    return Request(state);
  }
  return p2p_stream_.post(key, [this, to, tag, payload] {
    do_send_bytes(to, tag, payload);
    return std::size_t{0};
  });
}

Request Transport::ireceive(int from, Tag tag, std::span<std::byte> into, std::size_t element) {
  check_receive(from, tag, into, "irecv");
  CallRecord::process().posted(
      record_group_, {.operation = "irecv", .count = into.size(), .peer = from, .tag = tag});
  return posted_receives_.post({.peer = from, .tag = tag}, into, element);
}

void Transport::check_send(int to, Tag tag, std::span<const std::byte> payload,
                           std::string_view operation) const {
  check_peer(to, operation);
  check_tag(tag, operation);
  check_payload(payload, operation);
}

void Transport::check_receive(int from, Tag tag, std::span<std::byte> into,
                              std::string_view operation) const {
  check_peer(from, operation);
  check_tag(tag, operation);
  if (into.data() == nullptr && !into.empty()) {
    throw CollectiveError(ErrorKind::invalid_argument,
                          site(operation, from, format_bytes(into.size())),
                          "the buffer is null but its length is not 0");
  }
}

std::size_t Transport::do_recv_bytes_into(int from, Tag tag, std::span<std::byte> into,
                                          std::size_t element) {
  return place_or_keep(from, tag, do_recv_bytes(from, tag), into, element);
}

std::size_t Transport::place_or_keep(int from, Tag tag, std::vector<std::byte> message,
                                     std::span<std::byte> into, std::size_t element) {
  const std::size_t length = message.size();
  if (message_fits(length, into.size(), element)) {
    if (length > 0) std::memcpy(into.data(), message.data(), length);
    recycle(std::move(message));
    return length;
  }
  {
    std::lock_guard lock(kept_mutex_);
    kept_[{from, tag}].push_front(std::move(message));
    kept_count_.fetch_add(1, std::memory_order_release);
  }
  const bool longer = length > into.size();
  throw CollectiveError(
      ErrorKind::invalid_argument,
      site("recv_bytes_into", from, "tag " + std::to_string(tag) + ", " + format_bytes(length)),
      "the message of " + std::to_string(length) + " bytes " +
          (longer ? "is longer than the buffer of " + std::to_string(into.size()) + " bytes"
                  : "is not a whole number of " + std::to_string(element) + "-byte elements"),
      "it is kept for the next receive from rank " + std::to_string(from) +
          " with this tag: receive it into a buffer that fits, or with recv_bytes");
}

std::optional<std::vector<std::byte>> Transport::take_kept(int from, Tag tag) {
  if (kept_count_.load(std::memory_order_acquire) == 0) return std::nullopt;
  std::lock_guard lock(kept_mutex_);
  const auto queue = kept_.find({from, tag});
  if (queue == kept_.end() || queue->second.empty()) return std::nullopt;
  std::vector<std::byte> message = std::move(queue->second.front());
  queue->second.pop_front();
  if (queue->second.empty()) kept_.erase(queue);
  kept_count_.fetch_sub(1, std::memory_order_release);
  return message;
}

}  // namespace rlx
