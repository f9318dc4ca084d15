#include "rlx/backend_choice.h"

#include <string>

#include "transport/errors.h"

namespace rlx {
namespace {

constexpr const char* kLookedFor =
    "RLX_WORLD_SIZE (set by rlxrun) and OMPI_COMM_WORLD_SIZE (set by mpirun)";

[[noreturn]] void unavailable(std::string_view detail, std::string_view hint) {
  throw CollectiveError(ErrorKind::backend_unavailable, {.operation = "init"}, detail, hint);
}

bool is_backend_name(std::string_view name) {
  return name == "any" || name == "tcp" || name == "mpi" || name == "verbs";
}

std::string_view resolve_request(const launch_env::LaunchEnv& env, std::string_view requested) {
  if (!is_backend_name(requested)) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "init"},
                          "unknown backend '" + std::string(requested) + "'",
                          "use one of any, tcp, mpi, verbs");
  }
  const std::string_view from_env =
      env.backend.empty() ? std::string_view("any") : std::string_view(env.backend);
  if (requested != "any" && from_env != "any" && requested != from_env) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "init"},
                          "the program asks for backend '" + std::string(requested) +
                              "' but RLX_BACKEND=" + env.backend,
                          "unset RLX_BACKEND, or call init(\"any\")");
  }
  return requested != "any" ? requested : from_env;
}

BackendKind choose_mpi(const launch_env::LaunchEnv& env, bool built) {
  if (!built) {
    unavailable("the mpi backend was requested but this rlx was built without it",
                "install libopenmpi-dev and reconfigure with -DRLX_WITH_MPI=AUTO");
  }
  if (!env.launched_by_mpirun()) {
    unavailable(
        "the mpi backend was requested but this process was not started by mpirun "
        "(OMPI_COMM_WORLD_SIZE is not set)",
        "start the program with mpirun -np N, or use rlxrun with the tcp backend");
  }
  return BackendKind::mpi;
}

BackendKind choose_launched(BackendKind kind, const launch_env::LaunchEnv& env, bool strict,
                            bool built) {
  const std::string name(name_of(kind));
  if (!built) {
    unavailable("the " + name + " backend was requested but this rlx was built without it",
                "reconfigure with the backend's libraries installed");
  }
  if (env.launched_by_rlxrun() && *env.world_size > 1) return kind;
  if (strict && !env.launched_by_rlxrun()) {
    unavailable("strict init: the " + name + " backend needs a launcher, and none was found",
                std::string("start the program with rlxrun; looked for ") + kLookedFor);
  }
  return BackendKind::singleton;
}

}  // namespace

std::string_view name_of(BackendKind kind) {
  switch (kind) {
    case BackendKind::singleton:
      return "singleton";
    case BackendKind::tcp:
      return "tcp";
    case BackendKind::mpi:
      return "mpi";
    case BackendKind::verbs:
      return "verbs";
  }
  return "invalid";
}

BackendKind choose_backend(const launch_env::LaunchEnv& env, std::string_view requested,
                           bool strict, BuiltBackends built) {
  const std::string_view choice = resolve_request(env, requested);
  if (choice == "mpi") return choose_mpi(env, built.mpi);
  if (choice == "tcp") return choose_launched(BackendKind::tcp, env, strict, true);
  if (choice == "verbs") return choose_launched(BackendKind::verbs, env, strict, built.verbs);
  if (env.launched_by_rlxrun()) {
    return *env.world_size > 1 ? BackendKind::tcp : BackendKind::singleton;
  }
  if (env.launched_by_mpirun() && *env.mpi_world_size > 1) {
    return choose_mpi(env, built.mpi);
  }
  if (strict) {
    unavailable("strict init found no distributed launcher",
                std::string("looked for ") + kLookedFor + "; start the program with rlxrun");
  }
  return BackendKind::singleton;
}

}  // namespace rlx
