#include "rlx/init.h"

#include <mutex>
#include <string>

#include "backends/mpi/mpi.h"
#include "backends/singleton/singleton_transport.h"
#include "backends/tcp/static_hostfile.h"
#include "backends/tcp/tcp.h"
#include "backends/verbs/verbs.h"
#include "collectives/array_collectives.h"
#include "rlx/backend_choice.h"
#include "transport/endpoint.h"
#include "transport/launch_env.h"
#include "transport/log.h"
#include "transport/rendezvous/server.h"

namespace rlx {
namespace {

std::shared_ptr<Transport> start(BackendKind kind, const launch_env::LaunchEnv& env) {
  switch (kind) {
    case BackendKind::tcp:
      return tcp::create(env);
    case BackendKind::mpi:
      return mpi::create(env);
    case BackendKind::verbs:
      return verbs::create(env);
    case BackendKind::singleton:
      break;
  }
  return std::make_shared<SingletonTransport>(env.timeout, env.unexpected_bytes_cap);
}

struct World {
  std::mutex mutex;
  std::shared_ptr<Transport> group;
  std::string requested;
  // torchrun-style rank 0's rendezvous: kept while the process runs, since
  // ranks may still be registering after this one got its table.
  std::unique_ptr<rendezvous::Server> rendezvous;
};

// MLX_HOSTFILE without MLX_WORLD_SIZE: the table's length is the group's size.
void size_from_static_table(launch_env::LaunchEnv& env) {
  if (env.group_source != launch_env::GroupSource::mlx || env.world_size) return;
  env.world_size = static_cast<int>(tcp::read_static_table(env.hostfile).size());
  if (*env.rank >= *env.world_size) {
    throw CollectiveError(ErrorKind::invalid_argument, launch_env::startup_site(env, "init"),
                          "MLX_RANK=" + std::to_string(*env.rank) + " but " + env.hostfile +
                              " lists " + std::to_string(*env.world_size) + " ranks");
  }
}

// Rank 0 of a torchrun-style launch serves the rendezvous on MASTER_PORT,
// on every address of this host (MASTER_ADDR names one of them).
std::unique_ptr<rendezvous::Server> host_rendezvous(const launch_env::LaunchEnv& env) {
  const HostPort at = parse_host_port(env.coordinator, "MASTER_ADDR:MASTER_PORT");
  try {
    return std::make_unique<rendezvous::Server>(*env.world_size, env.job_token, "0.0.0.0", at.port);
  } catch (const std::exception& error) {
    throw CollectiveError(ErrorKind::backend_unavailable,
                          launch_env::startup_site(env, "host the rendezvous"), error.what(),
                          "is MASTER_PORT free on rank 0's host?");
  }
}

World& world() {
  static World instance;
  return instance;
}

}  // namespace

Group init(std::string_view backend, bool strict) {
  World& w = world();
  std::lock_guard lock(w.mutex);
  if (w.group) {
    if (backend != "any" && backend != w.requested && backend != w.group->backend()) {
      throw CollectiveError(ErrorKind::invalid_argument, w.group->site("init"),
                            "already initialised with backend '" + w.requested +
                                "', now asked for '" + std::string(backend) + "'",
                            "call init once, or with the same backend");
    }
    return w.group;
  }
  auto env = launch_env::from_process_environment();
  configure_log(env.log_level, env.rank.value_or(env.mpi_rank.value_or(-1)));
  size_from_static_table(env);
  const auto kind =
      choose_backend(env, backend, strict, {.mpi = mpi::is_built(), .verbs = verbs::is_built()});
  if (env.hosts_rendezvous && kind != BackendKind::singleton && kind != BackendKind::mpi) {
    w.rendezvous = host_rendezvous(env);
  }
  log_lazily(LogLevel::debug, [&] {
    return "init(\"" + std::string(backend) + "\"): starting the " + std::string(name_of(kind)) +
           " backend (RLX_BACKEND=" + (env.backend.empty() ? "unset" : env.backend) + ")";
  });
  w.group = start(kind, env);
  log_lazily(LogLevel::info, [&] {
    return "rank " + std::to_string(w.group->rank()) + " of " +
           std::to_string(w.group->world_size()) + " on the " + std::string(w.group->backend()) +
           " backend";
  });
  w.requested = std::string(backend);
  distributed::register_collective_ops();
  distributed::set_default_group(w.group);
  return w.group;
}

bool is_mpi_built() { return mpi::is_built(); }
bool is_verbs_built() { return verbs::is_built(); }

}  // namespace rlx
