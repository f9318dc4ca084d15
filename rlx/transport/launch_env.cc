#include "rlx/transport/launch_env.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <span>
#include <thread>

#include "rlx/transport/errors.h"

namespace rlx::launch_env {
namespace {

[[noreturn]] void fail(const char* name, std::string_view value, std::string_view expected) {
  throw CollectiveError(ErrorKind::invalid_argument, {.operation = "read launch environment"},
                        std::string(name) + "='" + excerpt(value) + "' is not valid",
                        std::string(name) + " must be " + std::string(expected));
}

std::optional<std::string_view> get(const Lookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (value == nullptr) return std::nullopt;
  return std::string_view(value);
}

std::optional<long long> get_integer(const Lookup& lookup, const char* name, long long low,
                                     long long high, std::string_view expected) {
  auto text = get(lookup, name);
  if (!text) return std::nullopt;
  long long value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value < low || value > high) {
    fail(name, *text, expected);
  }
  return value;
}

std::optional<int> get_int(const Lookup& lookup, const char* name, int low, int high,
                           std::string_view expected) {
  auto value = get_integer(lookup, name, low, high, expected);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

std::chrono::milliseconds get_seconds(const Lookup& lookup, const char* name,
                                      std::chrono::milliseconds fallback) {
  auto text = get(lookup, name);
  if (!text) return fallback;
  double seconds = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), seconds);
  constexpr double kMaxSeconds = 365.0 * 24 * 3600;
  if (ec != std::errc() || end != text->data() + text->size() || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > kMaxSeconds) {
    fail(name, *text, "a number of seconds above 0 and at most a year, like 300 or 0.5");
  }
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000.0)));
}

std::string get_string(const Lookup& lookup, const char* name) {
  return std::string(get(lookup, name).value_or(""));
}

// What the kernel could name an algorithm: up to 15 letters, digits, '_' or '-'.
bool is_algorithm_name(std::string_view name) {
  constexpr std::size_t kMaxName = 15;
  if (name.size() > kMaxName) return false;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

constexpr int kMaxRanks = 1 << 20;

// RLX_RANK and RLX_WORLD_SIZE come together or not at all.
void parse_rlxrun_group(const Lookup& lookup, LaunchEnv& env) {
  env.world_size = get_int(lookup, kWorldSize, 1, kMaxRanks, "a whole number from 1 to 1048576");
  env.rank = get_int(lookup, kRank, 0, kMaxRanks - 1, "a whole number from 0 to RLX_WORLD_SIZE-1");
  if (env.world_size.has_value() != env.rank.has_value()) {
    const char* missing = env.rank ? kWorldSize : kRank;
    const char* present = env.rank ? kRank : kWorldSize;
    fail(present, get(lookup, present).value_or(""),
         std::string("set together with ") + missing + " (rlxrun sets both)");
  }
  if (env.rank && *env.rank >= *env.world_size) {
    fail(kRank, *get(lookup, kRank), "below RLX_WORLD_SIZE=" + std::to_string(*env.world_size));
  }
  env.local_rank = get_int(lookup, kLocalRank, 0, kMaxRanks - 1, "a whole number from 0");
  env.local_size = get_int(lookup, kLocalSize, 1, kMaxRanks, "a whole number from 1");
  if (env.rank) env.group_source = GroupSource::rlx;
}

// Every variable of `names` that is set, or the first missing one: a
// launcher's set is used whole or not at all.
[[noreturn]] void fail_partial(const Lookup& lookup, std::span<const char* const> names,
                               const char* launcher) {
  std::string set, missing;
  for (const char* name : names) {
    std::string& list = get(lookup, name) ? set : missing;
    list += (list.empty() ? "" : ", ") + std::string(name);
  }
  throw CollectiveError(
      ErrorKind::invalid_argument, {.operation = "read launch environment"},
      set + (set.find(',') == std::string::npos ? " is" : " are") + " set but " + missing +
          " not: a partial " + launcher + " environment",
      "set all of them (a " + std::string(launcher) + " launch does), or none for a group of one");
}

// MLX_RANK and MLX_HOSTFILE (mlx.launch's ring backend); MLX_WORLD_SIZE,
// when set, must match the table's length (checked by the backend).
void parse_mlx_group(const Lookup& lookup, LaunchEnv& env) {
  static constexpr const char* kNames[] = {kMlxRank, kMlxHostfile};
  if (!get(lookup, kMlxRank) && !get(lookup, kMlxHostfile)) return;
  if (!get(lookup, kMlxRank) || !get(lookup, kMlxHostfile))
    fail_partial(lookup, kNames, "mlx.launch");
  env.group_source = GroupSource::mlx;
  env.rank = get_int(lookup, kMlxRank, 0, kMaxRanks - 1, "a whole number from 0");
  env.world_size = get_int(lookup, kMlxWorldSize, 1, kMaxRanks, "a whole number from 1");
  if (env.world_size && *env.rank >= *env.world_size) {
    fail(kMlxRank, *get(lookup, kMlxRank),
         "below MLX_WORLD_SIZE=" + std::to_string(*env.world_size));
  }
  env.hostfile = get_string(lookup, kMlxHostfile);
}

// RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK, LOCAL_WORLD_SIZE):
// rank 0 hosts the rendezvous there. The job token is RLX_JOB_TOKEN when
// set; otherwise one derived from what every rank sees (keeps concurrent
// jobs apart; not a secret).
void parse_torchrun_group(const Lookup& lookup, LaunchEnv& env) {
  static constexpr const char* kNames[] = {kTorchRank, kTorchWorldSize, kMasterAddr, kMasterPort};
  std::size_t present = 0;
  for (const char* name : kNames) present += get(lookup, name).has_value();
  if (present == 0) return;
  if (present < std::size(kNames)) fail_partial(lookup, kNames, "torchrun");
  env.group_source = GroupSource::torchrun;
  env.world_size = get_int(lookup, kTorchWorldSize, 1, kMaxRanks, "a whole number from 1");
  env.rank = get_int(lookup, kTorchRank, 0, kMaxRanks - 1, "a whole number from 0");
  if (*env.rank >= *env.world_size) {
    fail(kTorchRank, *get(lookup, kTorchRank),
         "below WORLD_SIZE=" + std::to_string(*env.world_size));
  }
  const int port = *get_int(lookup, kMasterPort, 1, 65535, "a port number from 1 to 65535");
  const std::string address = get_string(lookup, kMasterAddr);
  if (address.empty()) fail(kMasterAddr, address, "a host name or address");
  // RLX_COORDINATOR's form, which parse_host_port reads: brackets around IPv6.
  const bool ipv6 = address.find(':') != std::string::npos;
  env.coordinator = (ipv6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
  env.hosts_rendezvous = *env.rank == 0;
  env.local_rank = get_int(lookup, kTorchLocalRank, 0, kMaxRanks - 1, "a whole number from 0");
  env.local_size = get_int(lookup, kTorchLocalSize, 1, kMaxRanks, "a whole number from 1");
}

void parse_mpirun_group(const Lookup& lookup, LaunchEnv& env) {
  env.mpi_world_size = get_int(lookup, kOmpiWorldSize, 1, 1 << 30, "a whole number from 1");
  env.mpi_rank = get_int(lookup, kOmpiRank, 0, (1 << 30) - 1, "a whole number from 0");
}

void detect_foreign_launcher(const Lookup& lookup, LaunchEnv& env) {
  for (const char* name : kForeignSizes) {
    const auto text = get(lookup, name);
    if (!text) continue;
    long long size = 0;
    auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), size);
    if (ec == std::errc() && end == text->data() + text->size() && size > 1) {
      env.foreign_launcher = std::string(name) + "=" + std::string(*text);
      return;
    }
  }
}

AllReduceAlgorithm get_all_reduce_algorithm(const Lookup& lookup) {
  const std::string name = get_string(lookup, kAllReduceAlgorithm);
  if (name.empty() || name == "auto") return AllReduceAlgorithm::by_size;
  if (name == "ring") return AllReduceAlgorithm::ring;
  if (name == "recursive_doubling") return AllReduceAlgorithm::recursive_doubling;
  fail(kAllReduceAlgorithm, name, "auto, ring or recursive_doubling");
}

LogLevel get_log_level(const Lookup& lookup) {
  const std::string name = get_string(lookup, kLog);
  if (name.empty() || name == "warn") return LogLevel::warn;
  if (name == "info") return LogLevel::info;
  if (name == "debug") return LogLevel::debug;
  fail(kLog, name, "debug, info or warn");
}

VerbsSettings get_verbs_settings(const Lookup& lookup) {
  VerbsSettings verbs;
  verbs.device = get_string(lookup, kIbDevice);
  verbs.port = get_int(lookup, kIbPort, 1, 255, "a port number from 1 to 255").value_or(0);
  verbs.gid_index = get_int(lookup, kIbGidIndex, 0, 65535, "a GID index from 0 to 65535");
  if (auto us = get_int(lookup, kVerbsSpin, 0, 1'000'000,
                        "a whole number of microseconds from 0 to 1000000")) {
    verbs.caller_spin = std::chrono::microseconds(*us);
  }
  return verbs;
}

}  // namespace

RecordSettings record_settings(const Lookup& lookup) {
  RecordSettings settings;
  if (auto entries =
          get_integer(lookup, kRecordCalls, 0, kMaxRecordedCalls,
                      "a number of calls from 0 (off) to " + std::to_string(kMaxRecordedCalls))) {
    settings.entries = static_cast<std::size_t>(*entries);
  }
  settings.dump_dir = get_string(lookup, kDumpDir);
  settings.trace_dir = get_string(lookup, kTrace);
  if (!settings.trace_dir.empty() && settings.entries == 0) {
    throw CollectiveError(ErrorKind::invalid_argument, {.operation = "read launch environment"},
                          std::string(kTrace) + " is set but " + kRecordCalls +
                              "=0 turns the record off, and the trace is written from it",
                          std::string("unset ") + kRecordCalls + " or " + kTrace);
  }
  return settings;
}

LaunchEnv parse(const Lookup& lookup) {
  LaunchEnv env;
  env.coordinator = get_string(lookup, kCoordinator);
  env.job_token = get_string(lookup, kJobToken);
  env.hostfile = get_string(lookup, kHostfile);
  parse_rlxrun_group(lookup, env);
  if (env.group_source == GroupSource::none) parse_mlx_group(lookup, env);
  if (env.group_source == GroupSource::none) parse_torchrun_group(lookup, env);
  if (env.group_source == GroupSource::none && get(lookup, kPmixNamespace)) {
    env.group_source = GroupSource::pmix;
    env.rank = get_int(lookup, kPmixRank, 0, kMaxRanks - 1, "a whole number from 0");
  }
  if (env.group_source == GroupSource::torchrun && env.job_token.empty()) {
    env.job_token = "torchrun " + env.coordinator + " " + std::to_string(*env.world_size) + " " +
                    get_string(lookup, kTorchRunId);
  }
  parse_mpirun_group(lookup, env);
  detect_foreign_launcher(lookup, env);
  env.ifname = get_string(lookup, kIfname);
  env.host_address = get_string(lookup, kHostAddress);
  env.backend = get_string(lookup, kBackend);
  if (!env.backend.empty() && env.backend != "any" && env.backend != "tcp" &&
      env.backend != "mpi" && env.backend != "verbs" && env.backend != "singleton") {
    fail(kBackend, env.backend, "one of tcp, mpi, verbs, singleton, any");
  }
  env.timeout = get_seconds(lookup, kTimeout, kDefaultTimeout);
  env.connect_timeout = get_seconds(lookup, kConnectTimeout, kDefaultConnectTimeout);
  if (auto cap = get_integer(lookup, kUnexpectedCap, 0, std::int64_t{1} << 50,
                             "a number of bytes from 0 to 2^50")) {
    env.unexpected_bytes_cap = static_cast<std::size_t>(*cap);
  }
  if (auto lanes = get_int(lookup, kTcpLanes, 1, 8, "a whole number of streams from 1 to 8")) {
    env.tcp_lanes = *lanes;
  }
  env.tcp_congestion = get_string(lookup, kTcpCongestion);
  if (!is_algorithm_name(env.tcp_congestion)) {
    fail(kTcpCongestion, env.tcp_congestion,
         "auto, system, or a congestion control algorithm's name (like cubic or reno)");
  }
  env.all_reduce_algorithm = get_all_reduce_algorithm(lookup);
  env.cost_model_file = get_string(lookup, kCostModel);
  env.tune = parse_tune(get_string(lookup, kTune));
  env.shm = get_int(lookup, kShm, 0, 1, "0 (off) or 1 (on)").value_or(1) == 1;
  env.log_level = get_log_level(lookup);
  env.output_tagged = get_string(lookup, kOutputTagged) == "1";
  env.record = record_settings(lookup);
  env.verbs = get_verbs_settings(lookup);
  return env;
}

LaunchEnv from_process_environment() {
  return parse([](const char* name) -> const char* { return std::getenv(name); });
}

std::string_view name_of(GroupSource source) {
  switch (source) {
    case GroupSource::none:
      return "none";
    case GroupSource::rlx:
      return "RLX_RANK/RLX_WORLD_SIZE";
    case GroupSource::mlx:
      return "MLX_RANK/MLX_HOSTFILE";
    case GroupSource::torchrun:
      return "torchrun's RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT";
    case GroupSource::pmix:
      return "PMIx (PMIX_RANK, PMIX_NAMESPACE)";
  }
  return "?";
}

ErrorSite startup_site(const LaunchEnv& env, std::string operation) {
  return {.rank = env.rank.value_or(-1),
          .world_size = env.world_size.value_or(-1),
          .operation = std::move(operation)};
}

bool is_per_rank_variable(std::string_view name) {
  return std::find(std::begin(kPerRankVariables), std::end(kPerRankVariables), name) !=
         std::end(kPerRankVariables);
}

bool ranks_share_cores(int ranks_on_host) {
  const auto threads = std::thread::hardware_concurrency();  // 0 when unknown
  return threads > 0 && ranks_on_host > static_cast<int>(threads);
}

}  // namespace rlx::launch_env
