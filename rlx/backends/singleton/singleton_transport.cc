#include "rlx/backends/singleton/singleton_transport.h"

namespace rlx {

SingletonTransport::SingletonTransport(std::chrono::milliseconds timeout, std::size_t byte_cap)
    : Transport(0, 1, "singleton", timeout), byte_cap_(byte_cap), mailbox_(byte_cap) {}

std::shared_ptr<Transport> SingletonTransport::do_split(const SplitPlan& plan) {
  if (plan.rank < 0) return nullptr;
  return std::make_shared<SingletonTransport>(timeout(), byte_cap_);
}

void SingletonTransport::do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) {
  if (!mailbox_.deliver(to, tag, {payload.begin(), payload.end()}, mailbox_.awaited(to, tag))) {
    throw CollectiveError(
        ErrorKind::resource_exhausted,
        site("send_bytes", to, "tag " + std::to_string(tag) + ", " + format_bytes(payload.size())),
        "messages sent to self and not yet received would exceed " +
            format_bytes(mailbox_.byte_cap()),
        "receive what you send, or raise RLX_UNEXPECTED_BYTES");
  }
}

std::vector<std::byte> SingletonTransport::do_recv_bytes(int from, Tag tag) {
  auto message = mailbox_.take(from, tag, Mailbox::Clock::now() + timeout());
  if (!message) {
    throw CollectiveError(
        ErrorKind::timeout, receive_site(from, tag),
        "nothing was sent with this tag within " + std::to_string(timeout().count()) + " ms",
        "in a group of one, only this process can send the message");
  }
  return std::move(*message);
}

std::optional<std::size_t> SingletonTransport::do_try_recv_bytes_into(int from, Tag tag,
                                                                      std::span<std::byte> into,
                                                                      std::size_t element) {
  auto message = mailbox_.try_take(from, tag);
  if (!message) return std::nullopt;
  return place_or_keep(from, tag, std::move(*message), into, element);
}

void SingletonTransport::do_expect_messages(int from, Tag tag, int change) {
  mailbox_.expect(from, tag, change);
}

// The collectives of a one-rank group never reach the backend (Transport
// answers them), so these are unreachable by construction.
void SingletonTransport::do_all_reduce(ElementSpan, ReduceOp) {}
void SingletonTransport::do_all_gather(ConstElementSpan, ElementSpan) {}
void SingletonTransport::do_reduce_scatter(ConstElementSpan, ElementSpan, ReduceOp) {}
void SingletonTransport::do_broadcast(ElementSpan, int) {}
void SingletonTransport::do_all_to_all(ConstElementSpan, ElementSpan) {}
void SingletonTransport::do_reduce(ElementSpan, ReduceOp, int) {}
void SingletonTransport::do_gather(ConstElementSpan, ElementSpan, int) {}
void SingletonTransport::do_scatter(ConstElementSpan, ElementSpan, int) {}
void SingletonTransport::do_all_gather_v(ConstElementSpan, ElementSpan,
                                         std::span<const std::size_t>) {}
void SingletonTransport::do_all_to_all_v(ConstElementSpan, std::span<const std::size_t>,
                                         ElementSpan, std::span<const std::size_t>) {}
void SingletonTransport::do_barrier() {}

}  // namespace rlx
