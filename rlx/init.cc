#include "rlx/init.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>

#include "rlx/backend_choice.h"
#include "rlx/backends/mpi/mpi.h"
#include "rlx/backends/singleton/singleton_transport.h"
#include "rlx/backends/tcp/static_hostfile.h"
#include "rlx/backends/tcp/tcp.h"
#include "rlx/backends/verbs/verbs.h"
#include "rlx/collectives/array_collectives.h"
#include "rlx/core/blas_threads.h"
#include "rlx/transport/auth.h"
#include "rlx/transport/endpoint.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/log.h"
#include "rlx/transport/rendezvous/pmix_client.h"
#include "rlx/transport/rendezvous/server.h"
#include "rlx/transport/subgroup_setup.h"

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
  bool finalized = false;
  // torchrun-style rank 0's rendezvous: kept while the process runs, since
  // ranks may still be registering after this one got its table.
  std::unique_ptr<rendezvous::Server> rendezvous;
  // The PMIx server's client, when one started this process (finalised at exit).
  std::shared_ptr<pmix::Client> pmix;
};

// MLX_HOSTFILE without MLX_WORLD_SIZE: the table's length is the group's
// size. An MLX_RANK outside it is a setting to fix, not a rank of a group.
void size_from_static_table(launch_env::LaunchEnv& env) {
  if (env.group_source != launch_env::GroupSource::mlx || env.world_size) return;
  const auto hosts = tcp::read_static_table(env).size();
  if (static_cast<std::size_t>(*env.rank) >= hosts) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "init"},
                          "MLX_RANK=" + std::to_string(*env.rank) + " but MLX_HOSTFILE lists " +
                              std::to_string(hosts) + (hosts == 1 ? " host" : " hosts") + " (" +
                              env.hostfile + ")",
                          "MLX_RANK counts from 0 to one less than the hosts in MLX_HOSTFILE");
  }
  env.world_size = static_cast<int>(hosts);
}

// Where a rank that joins through PMIx listens: the configured address;
// loopback when the whole job runs on this host; else the address that
// routes to a rank on another host (as rlxrun's ranks use the one that
// routes to its rendezvous).
std::string pmix_listen_host(const launch_env::LaunchEnv& env, pmix::Client& client) {
  if (auto configured = configured_address(env)) return *configured;
  if (env.local_size == env.world_size) return "127.0.0.1";
  const std::string here = client.host_of(*env.rank);
  for (int r = 0; r < *env.world_size; ++r) {
    const std::string there = client.host_of(r);
    if (!there.empty() && there != here) return source_address_towards(there);
  }
  return "127.0.0.1";
}

// Joins a PMIx launcher's job: its size from the server, a job token made
// by rank 0 and shared through the server's store (unless RLX_JOB_TOKEN),
// then every rank's endpoint through the store. A job of one is a group of one.
std::shared_ptr<Transport> join_through_pmix(BackendKind kind, launch_env::LaunchEnv& env,
                                             World& w) {
  w.pmix = pmix::Client::connect();
  const pmix::Membership m = w.pmix->membership();
  env.rank = m.rank;
  env.world_size = m.size;
  env.local_rank = m.local_rank;
  env.local_size = m.local_size;
  if (m.size == 1) return start(BackendKind::singleton, env);
  if (env.job_token.empty()) {
    const std::string mine = m.rank == 0 ? auth::fresh_token() : std::string("-");
    env.job_token = w.pmix->all_gather("rlx.token", mine, env.connect_timeout)[0];
  }
  const std::string key = "rlx." + std::string(name_of(kind)) + ".endpoint";
  const EndpointExchange exchange = [&](const HostPort& own) {
    std::vector<HostPort> table;
    for (const std::string& text : w.pmix->all_gather(key, own.to_string(), env.connect_timeout))
      table.push_back(parse_host_port(text, "a rank's endpoint from PMIx"));
    return table;
  };
  if (kind == BackendKind::verbs) return verbs::create(env, exchange);
  return tcp::create(env, pmix_listen_host(env, *w.pmix), exchange);
}

// Rank 0 of a torchrun-style launch serves the rendezvous on MASTER_PORT,
// on MASTER_ADDR when that is an address of this host (every address when it
// is a name), as the mesh listens.
std::unique_ptr<rendezvous::Server> host_rendezvous(const launch_env::LaunchEnv& env) {
  const HostPort at = parse_host_port(env.coordinator, "MASTER_ADDR:MASTER_PORT");
  try {
    return std::make_unique<rendezvous::Server>(
        *env.world_size, env.job_token, listen_address_for(at.host, /*chosen=*/true), at.port);
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
  if (w.finalized) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "init"},
                          "rlx::finalize() was called already",
                          "initialise once, and finalize at the end of the program");
  }
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
  // Under rlxrun's tags ("[2] ...") the rank is said once.
  configure_log(env.log_level,
                env.output_tagged ? -1 : env.rank.value_or(env.mpi_rank.value_or(-1)));
  size_from_static_table(env);
  const auto kind =
      choose_backend(env, backend, strict, {.mpi = mpi::is_built(), .verbs = verbs::is_built()});
  const bool networked = kind == BackendKind::tcp || kind == BackendKind::verbs;
  if (env.hosts_rendezvous && networked) w.rendezvous = host_rendezvous(env);
  log_lazily(LogLevel::debug, [&] {
    return "init(\"" + std::string(backend) + "\"): starting the " + std::string(name_of(kind)) +
           " backend (RLX_BACKEND=" + (env.backend.empty() ? "unset" : env.backend) + ")";
  });
  w.group = networked && env.group_source == launch_env::GroupSource::pmix
                ? join_through_pmix(kind, env, w)
                : start(kind, env);
  log_lazily(LogLevel::info, [&] {
    return "rank " + std::to_string(w.group->rank()) + " of " +
           std::to_string(w.group->world_size()) + " on the " + std::string(w.group->backend()) +
           " backend";
  });
  const char* mpi_local_size = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const int ranks_here = env.local_size   ? *env.local_size
                         : mpi_local_size ? std::max(1, std::atoi(mpi_local_size))
                                          : env.ranks_here();
  const std::string blas_threads = fit_blas_threads(ranks_here);
  log_lazily(LogLevel::debug, [&] { return blas_threads; });
  w.requested = std::string(backend);
  distributed::register_collective_ops();
  distributed::set_default_group(w.group);
  return w.group;
}

void finalize() {
  World& w = world();
  std::shared_ptr<Transport> group;
  {
    std::lock_guard lock(w.mutex);
    w.finalized = true;
    group = std::move(w.group);
  }
  distributed::set_default_group(nullptr);
  // Closes here, outside the lock, when this was the last handle.
  group.reset();
}

bool is_mpi_built() { return mpi::is_built(); }
bool is_verbs_built() { return verbs::is_built(); }

bool is_backend_built(std::string_view name) {
  if (name == "tcp" || name == "singleton") return true;
  if (name == "mpi") return is_mpi_built();
  if (name == "verbs") return is_verbs_built();
  throw Error("unknown backend '" + std::string(name) + "' (tcp, mpi, verbs or singleton)");
}

}  // namespace rlx
