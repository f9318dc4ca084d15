// The RDMA verbs transport: rdma_cm connections authenticated with the job
// token, eager SENDs for small messages, RDMA WRITE_WITH_IMM rings for large
// ones and for collective steps, and the algorithms of rlx/collectives/ on top.
// Selected with RLX_BACKEND=verbs (rlxrun --backend verbs).
#pragma once

#include <memory>

#include "rlx/backends/verbs/connection_manager.h"
#include "rlx/backends/verbs/device.h"
#include "rlx/backends/verbs/engine.h"
#include "rlx/backends/verbs/verbs_links.h"
#include "rlx/collectives/links_transport.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/mailbox.h"
#include "rlx/transport/subgroup_setup.h"

namespace rlx::verbs {

class VerbsTransport final : public LinksTransport {
 public:
  // Joins the job described by `env`: picks the RDMA address, listens,
  // registers it with the rendezvous and connects to every rank.
  explicit VerbsTransport(const launch_env::LaunchEnv& env);
  // A group split() made: on the parent's `address`, learning its peers'
  // endpoints through `exchange` (over the parent) instead of the rendezvous;
  // `watch` ends the wait for their connections early (split_as).
  VerbsTransport(const launch_env::LaunchEnv& env, const std::string& address,
                 const EndpointExchange& exchange, SetupWatch watch = {});
  ~VerbsTransport() override;

  // The address and rdma_cm port this rank listens on, and its device.
  const std::string& address() const { return cm_->address(); }
  std::uint16_t port() const { return cm_->port(); }
  std::string device_name() const { return device_->name(); }

 protected:
  void send_over_network(int to, Tag tag, std::span<const std::byte> payload) override;
  std::vector<std::byte> recv_over_network(int from, Tag tag) override;
  Mailbox& mailbox() override { return mailbox_; }
  Links& links() override { return *links_; }
  const FailureLatch& failure_latch() const override { return latch_; }

 private:
  void set_up(const launch_env::LaunchEnv& env);
  // Opens the device serving `address` and the engine (`may_fall_back`: to
  // the first active port when no device serves it and nothing was asked for).
  void open_device(const launch_env::LaunchEnv& env, std::string address, bool may_fall_back);
  // Connects to every peer of `table`, starts the engine, sets up shared memory.
  void join(const launch_env::LaunchEnv& env, const std::vector<HostPort>& table, Deadline deadline,
            const SetupWatch& watch = {});
  std::shared_ptr<Transport> do_split(const SplitPlan& plan) override;
  std::string choose_address(const launch_env::LaunchEnv& env, const DeviceSettings& settings,
                             int coordinator_fd);
  void connect_mesh(const std::vector<HostPort>& table, Deadline deadline, const SetupWatch& watch);
  // Tears down in the order the verbs objects need: queue pairs, memory,
  // CQ and PD, then the listening id and event channel.
  void tear_down() noexcept;

  FailureLatch latch_;
  Mailbox mailbox_;
  launch_env::LaunchEnv env_;  // for the groups split() makes
  std::unique_ptr<ConnectionManager> cm_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<VerbsLinks> links_;
};

}  // namespace rlx::verbs
