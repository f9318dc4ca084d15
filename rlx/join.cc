#include "rlx/join.h"

#include <cstdlib>
#include <string>

#include "rlx/backend_choice.h"
#include "rlx/backends/singleton/singleton_transport.h"
#include "rlx/backends/tcp/tcp.h"
#include "rlx/backends/verbs/verbs.h"
#include "rlx/collectives/array_collectives.h"
#include "rlx/transport/auth.h"
#include "rlx/transport/endpoint.h"
#include "rlx/transport/launch_env.h"

namespace rlx {
namespace {

constexpr std::string_view kStoreHint =
    "did every rank of the group join it (init_process_group, new_group) within the store's "
    "timeout?";

// The settings alone: who is who comes from the caller, so a launcher's
// partial or foreign variables (RANK without MASTER_ADDR) are no error here.
launch_env::LaunchEnv settings_from_environment(int rank, int size, const JoinOptions& options) {
  auto env = launch_env::parse([](const char* name) -> const char* {
    return launch_env::is_per_rank_variable(name) ? nullptr : std::getenv(name);
  });
  env.group_source = launch_env::GroupSource::rlx;
  env.rank = rank;
  env.world_size = size;
  if (options.timeout.count() > 0) env.timeout = options.timeout;
  return env;
}

void check_membership(int rank, int size) {
  if (size >= 1 && rank >= 0 && rank < size) return;
  throw CollectiveError(ErrorKind::invalid_argument, {.rank = rank, .operation = "join"},
                        "rank " + std::to_string(rank) + " of a group of " + std::to_string(size),
                        "ranks count from 0 to size - 1");
}

// "any" takes RLX_BACKEND's verbs; every other choice (mpi's world under
// mpirun, say) leaves the groups made through a store to tcp.
BackendKind backend_for(std::string_view asked, const launch_env::LaunchEnv& env) {
  const std::string_view name = asked == "any" && env.backend == "verbs" ? "verbs" : asked;
  if (name == "any" || name == "tcp") return BackendKind::tcp;
  if (name == "verbs") return BackendKind::verbs;
  throw CollectiveError(ErrorKind::invalid_argument,
                        launch_env::startup_site(env, "join through a store"),
                        "backend '" + std::string(name) + "' cannot join through a store",
                        "ask for tcp or verbs (or any); mpi's groups come from mpirun");
}

// The store's own failure (its timeout, a lost connection) as rlx's error.
template <typename Call>
auto through_store(const launch_env::LaunchEnv& env, std::string_view what, const Call& call) {
  try {
    return call();
  } catch (const std::exception& error) {
    throw CollectiveError(ErrorKind::timeout, launch_env::startup_site(env, "join through a store"),
                          std::string(what) + " failed: " + error.what(), kStoreHint);
  }
}

std::string get(const KeyValueStore& store, const std::string& key,
                const launch_env::LaunchEnv& env) {
  return through_store(env, "reading '" + key + "' from the store", [&] { return store.get(key); });
}

void set(const KeyValueStore& store, const std::string& key, const std::string& value,
         const launch_env::LaunchEnv& env) {
  through_store(env, "writing '" + key + "' to the store", [&] { store.set(key, value); });
}

// Where the others reach this rank: the configured address, else the one
// that routes to the host they all reach, else loopback.
std::string reachable_host(const launch_env::LaunchEnv& env, const JoinOptions& options) {
  if (auto configured = configured_address(env)) return *configured;
  if (!options.reach_from.empty()) return source_address_towards(options.reach_from);
  if (const char* master = std::getenv(launch_env::kMasterAddr); master && *master)
    return source_address_towards(master);
  return "127.0.0.1";
}

}  // namespace

Group join(int rank, int size, const KeyValueStore& store, const JoinOptions& options) {
  check_membership(rank, size);
  auto env = settings_from_environment(rank, size, options);
  const BackendKind kind = backend_for(options.backend, env);
  distributed::register_collective_ops();
  if (size == 1)
    return Group(std::make_shared<SingletonTransport>(env.timeout, env.unexpected_bytes_cap));
  if (rank == 0) {
    env.job_token = auth::fresh_token();
    set(store, "rlx/token", env.job_token, env);
  } else {
    env.job_token = get(store, "rlx/token", env);
  }
  const EndpointExchange exchange = [&](const HostPort& own) {
    set(store, "rlx/endpoint/" + std::to_string(rank), own.to_string(), env);
    std::vector<HostPort> table;
    for (int r = 0; r < size; ++r) {
      const std::string key = "rlx/endpoint/" + std::to_string(r);
      table.push_back(parse_host_port(r == rank ? own.to_string() : get(store, key, env),
                                      "a rank's endpoint from the store"));
    }
    return table;
  };
  if (kind == BackendKind::verbs) return Group(verbs::create(env, exchange));
  return Group(tcp::create(env, reachable_host(env, options), exchange));
}

}  // namespace rlx
