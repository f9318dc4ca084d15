// The RDMA verbs transport: rdma_cm connections authenticated with the job
// token, eager SENDs for small messages, RDMA WRITE_WITH_IMM rings for large
// ones and for collective steps, and the algorithms of collectives/ on top.
// Selected with RLX_BACKEND=verbs (rlxrun --backend verbs).
#pragma once

#include <memory>

#include "transport/launch_env.h"
#include "transport/mailbox.h"
#include "transport/tcp/failure_latch.h"
#include "transport/transport.h"
#include "transport/verbs/connection_manager.h"
#include "transport/verbs/device.h"
#include "transport/verbs/engine.h"
#include "transport/verbs/verbs_links.h"

namespace rlx::verbs {

class VerbsTransport final : public Transport {
 public:
  // Joins the job described by `env`: picks the RDMA address, listens,
  // registers it with the rendezvous and connects to every rank.
  explicit VerbsTransport(const launch_env::LaunchEnv& env);
  ~VerbsTransport() override;

  // The address and rdma_cm port this rank listens on, and its device.
  const std::string& address() const { return cm_->address(); }
  std::uint16_t port() const { return cm_->port(); }
  std::string device_name() const { return device_->name(); }

 protected:
  void do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) override;
  std::vector<std::byte> do_recv_bytes(int from, Tag tag) override;
  void do_all_reduce(ElementSpan data, ReduceOp op) override;
  void do_all_gather(ConstElementSpan input, ElementSpan output) override;
  void do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) override;
  void do_barrier() override;

 private:
  void set_up(const launch_env::LaunchEnv& env);
  std::string choose_address(const launch_env::LaunchEnv& env, const DeviceSettings& settings,
                             int coordinator_fd);
  void connect_mesh(const std::vector<HostPort>& table, Deadline deadline);
  // Tears down in the order the verbs objects need: queue pairs, memory,
  // CQ and PD, then the listening id and event channel.
  void tear_down() noexcept;
  CollectiveCall next_call(CollectiveKind kind, ReduceOp op, Dtype dtype, std::uint64_t count);

  tcp::FailureLatch latch_;
  Mailbox mailbox_;
  std::unique_ptr<ConnectionManager> cm_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<VerbsLinks> links_;
  std::uint64_t sequence_ = 0;
};

}  // namespace rlx::verbs
