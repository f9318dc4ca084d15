#include "rlx/backends/verbs/verbs_transport.h"

#include <infiniband/verbs.h>
#include <poll.h>

#include "rlx/backends/verbs/verbs.h"
#include "rlx/collectives/algorithms.h"
#include "rlx/transport/endpoint.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/log.h"
#include "rlx/transport/rendezvous/client.h"

namespace rlx::verbs {
using launch_env::startup_site;

VerbsTransport::VerbsTransport(const launch_env::LaunchEnv& env)
    : LinksTransport(env, "verbs"), mailbox_(env.unexpected_bytes_cap) {
  try {
    set_up(env);
  } catch (...) {
    tear_down_same_host();
    tear_down();
    throw;
  }
}

VerbsTransport::VerbsTransport(const launch_env::LaunchEnv& env, const std::string& address,
                               const EndpointExchange& exchange, SetupWatch watch)
    : LinksTransport(env, "verbs"), mailbox_(env.unexpected_bytes_cap) {
  try {
    open_device(env, address, /*may_fall_back=*/false);
    const auto table = exchange({this->address(), port()});
    // The exchange has its own deadline; the connections' starts after it.
    join(env, table, Clock::now() + env.connect_timeout, watch);
  } catch (...) {
    tear_down_same_host();
    tear_down();
    throw;
  }
}

VerbsTransport::~VerbsTransport() {
  stop_background_work();
  tear_down_same_host();
  if (engine_) engine_->close();
  tear_down();
}

void VerbsTransport::tear_down() noexcept {
  if (engine_) engine_->stop();
  if (cm_) cm_->destroy_connections();
  links_.reset();
  engine_.reset();
  if (cm_) cm_->release_memory();
  device_.reset();
  cm_.reset();
}

std::string VerbsTransport::choose_address(const launch_env::LaunchEnv& env,
                                           const DeviceSettings& settings, int coordinator_fd) {
  if (auto configured = configured_address(env)) return *configured;
  const bool overridden = !settings.device.empty() || settings.port != 0 || settings.gid_index;
  if (overridden) return rdma_port_address(settings, startup_site(env, "choose RDMA device"));
  // The address that reaches the coordinator, when an RDMA device serves it.
  std::string address = local_host(coordinator_fd);
  if (is_loopback_address(address)) {
    address = rdma_port_address(settings, startup_site(env, "choose RDMA device"));
  }
  return address;
}

void VerbsTransport::set_up(const launch_env::LaunchEnv& env) {
  const Deadline deadline = Clock::now() + env.connect_timeout;
  const auto [fd, coordinator] = rendezvous::connect_to_coordinator(
      env, deadline, "start the program with rlxrun --backend verbs");
  open_device(env, choose_address(env, env.verbs, fd.get()), /*may_fall_back=*/true);
  const auto table = rendezvous::exchange_endpoints(fd.get(), coordinator, env.job_token, rank(),
                                                    world_size(), {address(), port()}, deadline);
  join(env, table, deadline);
}

void VerbsTransport::open_device(const launch_env::LaunchEnv& env, std::string address,
                                 bool may_fall_back) {
  const DeviceSettings& settings = env.verbs;
  cm_ = std::make_unique<ConnectionManager>(rank(), world_size(), env.job_token, address);
  if (may_fall_back && cm_->context() == nullptr && env.ifname.empty() && settings.device.empty()) {
    // The coordinator's route has no RDMA device behind it: use the first active port.
    address = rdma_port_address(settings, startup_site(env, "choose RDMA device"));
    cm_ = std::make_unique<ConnectionManager>(rank(), world_size(), env.job_token, address);
  }
  if (cm_->context() == nullptr) {
    throw CollectiveError(ErrorKind::backend_unavailable, startup_site(env, "choose RDMA device"),
                          "no RDMA device serves " + address +
                              (env.ifname.empty() ? "" : " (RLX_IFNAME=" + env.ifname + ")"),
                          "pick an interface with an RDMA device (`rdma link` lists them)");
  }
  const std::string chosen = verbs::device_name(cm_->context());
  if (!settings.device.empty() && chosen != settings.device) {
    throw CollectiveError(
        ErrorKind::invalid_argument, startup_site(env, "choose RDMA device"),
        "RLX_IB_DEVICE=" + settings.device + " but " + address + " belongs to " + chosen,
        "unset RLX_IFNAME or RLX_IB_DEVICE, or make them agree");
  }
  device_ = std::make_unique<Device>(cm_->context(), Engine::cq_entries(world_size()),
                                     startup_site(env, "open " + chosen));
  Engine::Spec spec{rank(), world_size(), timeout()};
  spec.caller_spin.yield = bounded_spin_for(env.ranks_here()).yield;
  if (env.verbs.caller_spin) spec.caller_spin.bound = *env.verbs.caller_spin;
  engine_ = std::make_unique<Engine>(spec, *device_, mailbox_, latch_);
  Engine& engine = *engine_;
  cm_->attach(device_->pd(), device_->cq(), Engine::queue_shape(),
              {.local_ring = [&engine](int peer) { return engine.local_ring(peer); },
               .post_receives = [&engine](int peer, ibv_qp* qp) { engine.post_receives(peer, qp); },
               .ready = [&engine](const PeerLink& link) { engine.on_ready(link); },
               .lost = [&engine](int peer, const std::string& why) { engine.on_lost(peer, why); }});
  ConnectionManager& cm = *cm_;
  engine.set_handshake_handler([&cm](const ibv_wc& wc) { cm.on_completion(wc); });
}

void VerbsTransport::join(const launch_env::LaunchEnv& env, const std::vector<HostPort>& table,
                          Deadline deadline, const SetupWatch& watch) {
  log_lazily(LogLevel::info, [&] {
    return "verbs over " + device_->name() + " at " + address() + ", port " +
           std::to_string(port()) + ": one RC queue pair to each of " +
           std::to_string(world_size() - 1) + " peers";
  });
  connect_mesh(table, deadline, watch);
  ConnectionManager& cm = *cm_;
  Engine& engine = *engine_;
  engine.start(cm.event_fd(), [&cm] { cm.handle_events(); });
  links_ = std::make_unique<VerbsLinks>(rank(), world_size(), engine);
  env_ = env;
  set_up_same_host(
      env, mailbox_, latch_,
      {.site = [this](std::string_view operation, int peer,
                      std::string sizes) { return site(operation, peer, std::move(sizes)); },
       .fail = [&engine](const CollectiveError& e) { engine.report_failure(e); }});
}

std::shared_ptr<Transport> VerbsTransport::do_split(const SplitPlan& plan) {
  return split_as<VerbsTransport>(
      *this, env_, plan, address(),
      {.fail = [this](const CollectiveError& e) { engine_->report_failure(e); }, .latch = latch_});
}

void VerbsTransport::connect_mesh(const std::vector<HostPort>& table, Deadline deadline,
                                  const SetupWatch& watch) {
  ConnectionManager& cm = *cm_;
  engine_->run_locked([&] { cm.start_connecting(table); });
  while (!cm.mesh_complete()) {
    latch_.rethrow_if_tripped();
    if (watch) watch();
    if (Clock::now() >= deadline) {
      throw CollectiveError(
          ErrorKind::timeout, site("connect"),
          "ranks " + cm.missing() + " never connected over RDMA before RLX_CONNECT_TIMEOUT_S",
          "those ranks' own output says why they did not start or connect");
    }
    pollfd fds[2] = {{cm.event_fd(), POLLIN, 0}, {device_->channel()->fd, POLLIN, 0}};
    ::poll(fds, 2, 1);
    engine_->run_locked([&] { cm.handle_events(); });
  }
  latch_.rethrow_if_tripped();
}

void VerbsTransport::send_over_network(int to, Tag tag, std::span<const std::byte> payload) {
  latch_.rethrow_if_tripped();
  if (to == rank()) return engine_->deliver_to_self(tag, payload);
  engine_->send_message(to, tag, payload);
}

std::vector<std::byte> VerbsTransport::recv_over_network(int from, Tag tag) {
  return as_receive_from(from, tag, [&] { return engine_->receive_message(from, tag); });
}

bool is_built() { return true; }

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env) {
  return std::make_shared<VerbsTransport>(env);
}

std::shared_ptr<Transport> create(const launch_env::LaunchEnv& env,
                                  const EndpointExchange& exchange) {
  auto address = configured_address(env);
  if (!address) address = rdma_port_address(env.verbs, startup_site(env, "choose RDMA device"));
  return std::make_shared<VerbsTransport>(env, *address, exchange);
}

}  // namespace rlx::verbs
