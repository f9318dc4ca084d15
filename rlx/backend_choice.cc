#include "rlx/backend_choice.h"

#include <string>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

constexpr const char* kLookedFor =
    "RLX_WORLD_SIZE (set by rlxrun), MLX_RANK (mlx.launch), WORLD_SIZE (torchrun) and "
    "OMPI_COMM_WORLD_SIZE (mpirun)";

[[noreturn]] void unavailable(std::string_view detail, std::string_view hint) {
  throw CollectiveError(ErrorKind::backend_unavailable, {.operation = "init"}, detail, hint);
}

bool is_backend_name(std::string_view name) {
  return name == "any" || name == "tcp" || name == "mpi" || name == "verbs" || name == "singleton";
}

struct BackendRequest {
  std::string_view backend;       // what to start, or "any"
  bool from_environment = false;  // RLX_BACKEND named it (not only the program)
};

BackendRequest resolve_request(const launch_env::LaunchEnv& env, std::string_view requested) {
  if (!is_backend_name(requested)) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "init"},
                          "unknown backend '" + std::string(requested) + "'",
                          "use one of any, tcp, mpi, verbs, singleton");
  }
  const std::string_view from_env =
      env.backend.empty() ? std::string_view("any") : std::string_view(env.backend);
  if (requested != "any" && from_env != "any" && requested != from_env) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "init"},
                          "the program asks for backend '" + std::string(requested) +
                              "' but RLX_BACKEND=" + env.backend,
                          "unset RLX_BACKEND, or call init(\"any\")");
  }
  if (from_env != "any") return {from_env, true};
  return {requested, false};
}

// Another launcher's processes, when the group of one would split them up.
std::string several_processes(const launch_env::LaunchEnv& env) {
  if (!env.foreign_launcher.empty()) return env.foreign_launcher;
  if (env.launched_by_mpirun() && *env.mpi_world_size > 1) {
    return "OMPI_COMM_WORLD_SIZE=" + std::to_string(*env.mpi_world_size);
  }
  return {};
}

// The group of one, unless that would silently split another launcher's job.
BackendKind group_of_one(const launch_env::LaunchEnv& env, std::string_view why) {
  const std::string others = several_processes(env);
  if (!others.empty()) {
    unavailable(std::string(why) + ", yet this process is one of several that another launcher " +
                    "started (" + others + "); each would run alone as a group of one",
                "start the program with rlxrun (any backend), mpirun (the mpi backend), or "
                "srun --mpi=pmix (a PMIx server lets rlx join); RLX_BACKEND=singleton runs "
                "every process alone on purpose");
  }
  return BackendKind::singleton;
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

BackendKind choose_launched(BackendKind kind, const launch_env::LaunchEnv& env,
                            const BackendRequest& request, bool strict, bool built) {
  const std::string name(name_of(kind));
  if (!built) {
    unavailable("the " + name + " backend was requested but this rlx was built without it",
                "reconfigure with the backend's libraries installed");
  }
  if (env.launched_by_rlxrun()) return *env.world_size > 1 ? kind : BackendKind::singleton;
  if (env.group_source == launch_env::GroupSource::pmix) return kind;  // init asks the size
  if (request.from_environment || strict) {
    const std::string asked = request.from_environment ? "RLX_BACKEND=" + name : "strict init";
    const std::string others = several_processes(env);
    unavailable(
        asked + ": the " + name +
            " backend needs a rank from rlxrun (RLX_RANK, RLX_WORLD_SIZE and "
            "RLX_COORDINATOR or RLX_HOSTFILE), mlx.launch or torchrun, and none is set" +
            (others.empty() ? ""
                            : "; this process was started by another launcher (" + others + ")"),
        std::string("start the program with rlxrun") +
            (env.launched_by_mpirun() ? ", or use RLX_BACKEND=mpi under mpirun" : "") +
            "; looked for " + kLookedFor);
  }
  return group_of_one(env, "the " + name + " backend's launcher (rlxrun) did not start it");
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
  const BackendRequest request = resolve_request(env, requested);
  if (request.backend == "singleton") return BackendKind::singleton;
  if (request.backend == "mpi") return choose_mpi(env, built.mpi);
  if (request.backend == "tcp") {
    return choose_launched(BackendKind::tcp, env, request, strict, true);
  }
  if (request.backend == "verbs") {
    return choose_launched(BackendKind::verbs, env, request, strict, built.verbs);
  }
  if (env.launched_by_rlxrun()) {
    return *env.world_size > 1 ? BackendKind::tcp : BackendKind::singleton;
  }
  if (env.launched_by_mpirun() && *env.mpi_world_size > 1) {
    return choose_mpi(env, built.mpi);
  }
  if (env.group_source == launch_env::GroupSource::pmix) return BackendKind::tcp;
  if (strict) {
    unavailable("strict init found no distributed launcher",
                std::string("looked for ") + kLookedFor + "; start the program with rlxrun");
  }
  return group_of_one(env, "rlx found no launcher it can join");
}

}  // namespace rlx
