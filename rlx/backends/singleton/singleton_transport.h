// The group of one: what a program gets when no launcher started it.
// Collectives are the identity (handled by Transport itself); a message sent
// to rank 0 is received from rank 0.
#pragma once

#include <memory>

#include "rlx/transport/launch_env.h"
#include "rlx/transport/mailbox.h"
#include "rlx/transport/transport.h"

namespace rlx {

class SingletonTransport final : public Transport {
 public:
  explicit SingletonTransport(std::chrono::milliseconds timeout = launch_env::kDefaultTimeout,
                              std::size_t byte_cap = launch_env::kDefaultUnexpectedCap);
  ~SingletonTransport() override { stop_background_work(); }

 protected:
  void do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) override;
  std::vector<std::byte> do_recv_bytes(int from, Tag tag) override;
  std::optional<std::size_t> do_try_recv_bytes_into(int from, Tag tag, std::span<std::byte> into,
                                                    std::size_t element) override;
  void do_expect_messages(int from, Tag tag, int change) override;
  void do_all_reduce(ElementSpan data, ReduceOp op) override;
  void do_all_gather(ConstElementSpan input, ElementSpan output) override;
  void do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) override;
  void do_broadcast(ElementSpan data, int root) override;
  void do_all_to_all(ConstElementSpan input, ElementSpan output) override;
  void do_reduce(ElementSpan data, ReduceOp op, int root) override;
  void do_gather(ConstElementSpan input, ElementSpan output, int root) override;
  void do_scatter(ConstElementSpan input, ElementSpan output, int root) override;
  void do_all_gather_v(ConstElementSpan input, ElementSpan output,
                       std::span<const std::size_t> counts) override;
  void do_all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                       ElementSpan output, std::span<const std::size_t> recv_counts) override;
  void do_barrier() override;
  // A group of one splits into a group of one (or none, for kNoColor).
  std::shared_ptr<Transport> do_split(const SplitPlan& plan) override;

 private:
  std::size_t byte_cap_;
  Mailbox mailbox_;
};

}  // namespace rlx
