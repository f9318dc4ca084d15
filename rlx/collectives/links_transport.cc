#include "rlx/collectives/links_transport.h"

#include "rlx/collectives/algorithms.h"
#include "rlx/transport/call_record.h"

namespace rlx {

LinksTransport::LinksTransport(const launch_env::LaunchEnv& env, std::string backend)
    : Transport(env.rank.value_or(0), env.world_size.value_or(1), std::move(backend), env.timeout),
      tuning_(tuning_for(env)) {}

LinksTransport::~LinksTransport() = default;

void LinksTransport::set_up_same_host(const launch_env::LaunchEnv& env, Mailbox& mailbox,
                                      FailureLatch& latch, SameHost::Hooks hooks) {
  hooks.all_gather = [this](std::span<const std::byte> mine, std::span<std::byte> all) {
    const CollectiveCall call{CollectiveKind::all_gather, ReduceOp::sum, Dtype::u8, mine.size(),
                              kSetupSequence + setup_sequence_++};
    rlx::all_gather(links(), call, {mine.data(), mine.size(), Dtype::u8},
                    {all.data(), all.size(), Dtype::u8});
  };
  same_host_ = std::make_unique<SameHost>(env, tuning_, rank(), world_size(), mailbox, latch,
                                          std::move(hooks));
}

void LinksTransport::tear_down_same_host() {
  if (same_host_) same_host_->finish_calls();
  same_host_.reset();
}

std::string LinksTransport::path_to(int peer) const {
  if (same_host_ && same_host_->shares_memory_with(peer)) return "shared memory";
  return Transport::path_to(peer);
}

Path LinksTransport::route() const {
  if (!same_host_ || same_host_->unused()) return Path::network;
  return same_host_->spans_job() ? Path::shared_memory : Path::hierarchical;
}

void LinksTransport::check_on_host(const CollectiveCall& call) {
  if (route() != Path::network && same_host_->group_of(rank()).size() > 1) {
    same_host_->collectives().check_call(call);
  }
}

void LinksTransport::do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) {
  if (same_host_ && same_host_->shares_memory_with(to)) {
    return same_host_->point_to_point().send(to, tag, payload);
  }
  send_over_network(to, tag, payload);
}

std::vector<std::byte> LinksTransport::do_recv_bytes(int from, Tag tag) {
  if (same_host_ && same_host_->shares_memory_with(from)) {
    return same_host_->point_to_point().recv(from, tag);
  }
  return recv_over_network(from, tag);
}

std::size_t LinksTransport::do_recv_bytes_into(int from, Tag tag, std::span<std::byte> into,
                                               std::size_t element) {
  if (!same_host_ || !same_host_->shares_memory_with(from)) {
    return recv_over_network_into(from, tag, into, element);
  }
  auto received = same_host_->point_to_point().recv_into(from, tag, into, element);
  if (!received.whole) return received.length;
  return place_or_keep(from, tag, std::move(*received.whole), into, element);
}

std::size_t LinksTransport::recv_over_network_into(int from, Tag tag, std::span<std::byte> into,
                                                   std::size_t element) {
  return place_or_keep(from, tag, recv_over_network(from, tag), into, element);
}

std::optional<std::size_t> LinksTransport::do_try_recv_bytes_into(int from, Tag tag,
                                                                  std::span<std::byte> into,
                                                                  std::size_t element) {
  if (!same_host_ || !same_host_->shares_memory_with(from)) {
    std::optional<std::vector<std::byte>> message =
        as_receive_from(from, tag, [&] { return mailbox().try_take(from, tag); });
    if (!message) return std::nullopt;
    return place_or_keep(from, tag, std::move(*message), into, element);
  }
  auto received = same_host_->point_to_point().try_recv_into(from, tag, into, element);
  if (!received) return std::nullopt;
  if (!received->whole) return received->length;
  return place_or_keep(from, tag, std::move(*received->whole), into, element);
}

void LinksTransport::do_expect_messages(int from, Tag tag, int change) {
  mailbox().expect(from, tag, change);
}

void LinksTransport::recycle(std::vector<std::byte>&& message) noexcept {
  mailbox().spare_buffers().give_back(std::move(message));
}

void LinksTransport::run(const CollectiveCall& call, const CollectiveArgs& args) {
  if (failure_latch().tripped()) failure_latch().rethrow_if_tripped(site(call.describe()));
  const std::size_t bytes = call.count * size_of(call.dtype);
  const CallSituation situation{.call = call,
                                .rank = rank(),
                                .ranks = world_size(),
                                .bytes = bytes,
                                .route = route(),
                                .host = same_host_.get()};
  const Choice choice = choose_algorithm(situation, tuning_);
  const Algorithm& algorithm = *choice.algorithm;
  log_choice(choices_, call, bytes, algorithm.name, name_of(algorithm.path), choice.why);
  CallRecord::process().note_choice(algorithm.name, name_of(algorithm.path));
  if (algorithm.path == Path::network) check_on_host(call);
  AlgorithmContext context{links(), same_host_.get(), tuning_};
  algorithm.run(context, call, args);
}

void LinksTransport::do_all_reduce(ElementSpan data, ReduceOp op) {
  run(next_call(CollectiveKind::all_reduce, op, data.dtype, data.count), {.output = data});
}

void LinksTransport::do_all_gather(ConstElementSpan input, ElementSpan output) {
  run(next_call(CollectiveKind::all_gather, ReduceOp::sum, input.dtype, input.count),
      {.input = input, .output = output});
}

void LinksTransport::do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) {
  run(next_call(CollectiveKind::reduce_scatter, op, output.dtype, output.count),
      {.input = input, .output = output});
}

void LinksTransport::do_broadcast(ElementSpan data, int root) {
  run(next_call(CollectiveKind::broadcast, ReduceOp::sum, data.dtype, data.count, root),
      {.output = data});
}

void LinksTransport::do_all_to_all(ConstElementSpan input, ElementSpan output) {
  run(next_call(CollectiveKind::all_to_all, ReduceOp::sum, input.dtype,
                input.count / static_cast<std::size_t>(world_size())),
      {.input = input, .output = output});
}

void LinksTransport::do_reduce(ElementSpan data, ReduceOp op, int root) {
  run(next_call(CollectiveKind::reduce, op, data.dtype, data.count, root), {.output = data});
}

void LinksTransport::do_gather(ConstElementSpan input, ElementSpan output, int root) {
  run(next_call(CollectiveKind::gather, ReduceOp::sum, input.dtype, input.count, root),
      {.input = input, .output = output});
}

void LinksTransport::do_scatter(ConstElementSpan input, ElementSpan output, int root) {
  run(next_call(CollectiveKind::scatter, ReduceOp::sum, output.dtype, output.count, root),
      {.input = input, .output = output});
}

void LinksTransport::do_all_gather_v(ConstElementSpan input, ElementSpan output,
                                     std::span<const std::size_t> counts) {
  run(next_call(CollectiveKind::all_gather_v, ReduceOp::sum, output.dtype, output.count),
      {.input = input, .output = output, .counts = counts});
}

void LinksTransport::do_all_to_all_v(ConstElementSpan input,
                                     std::span<const std::size_t> send_counts, ElementSpan output,
                                     std::span<const std::size_t> recv_counts) {
  run(next_call(CollectiveKind::all_to_all_v, ReduceOp::sum, input.dtype, 0),
      {.input = input, .output = output, .counts = send_counts, .recv_counts = recv_counts});
}

void LinksTransport::do_barrier() {
  run(next_call(CollectiveKind::barrier, ReduceOp::sum, Dtype::u8, 0), {});
}

}  // namespace rlx
