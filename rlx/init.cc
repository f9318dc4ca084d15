#include "rlx/init.h"

#include <mutex>
#include <string>

#include "backends/mpi/mpi.h"
#include "backends/singleton/singleton_transport.h"
#include "backends/tcp/tcp.h"
#include "backends/verbs/verbs.h"
#include "collectives/array_collectives.h"
#include "rlx/backend_choice.h"
#include "transport/launch_env.h"
#include "transport/log.h"

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
};

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
  const auto env = launch_env::from_process_environment();
  configure_log(env.log_level, env.rank.value_or(env.mpi_rank.value_or(-1)));
  const auto kind =
      choose_backend(env, backend, strict, {.mpi = mpi::is_built(), .verbs = verbs::is_built()});
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
