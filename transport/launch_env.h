// The contract between a launcher (rlxrun, or Open MPI's mpirun) and the
// library: the environment variables a rank reads when it calls rlx::init.
// rlxrun writes them; scripts may read them. This header is the only part of
// the library the launcher depends on.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "transport/errors.h"

namespace rlx::launch_env {

// Set by rlxrun for every rank.
inline constexpr const char* kRank = "RLX_RANK";                // 0..world_size-1
inline constexpr const char* kWorldSize = "RLX_WORLD_SIZE";     // number of ranks
inline constexpr const char* kLocalRank = "RLX_LOCAL_RANK";     // index among ranks on this host
inline constexpr const char* kLocalSize = "RLX_LOCAL_SIZE";     // ranks on this host
inline constexpr const char* kCoordinator = "RLX_COORDINATOR";  // host:port of the rendezvous
inline constexpr const char* kJobToken = "RLX_JOB_TOKEN";       // per-job secret, never on argv
// Set by the user or rlxrun.
inline constexpr const char* kBackend = "RLX_BACKEND";    // tcp | mpi | verbs | singleton | any
inline constexpr const char* kHostfile = "RLX_HOSTFILE";  // static JSON table of rank endpoints
inline constexpr const char* kIfname = "RLX_IFNAME";      // network interface to listen on
inline constexpr const char* kTimeout = "RLX_TIMEOUT_S";  // deadline of every operation (s)
inline constexpr const char* kConnectTimeout = "RLX_CONNECT_TIMEOUT_S";  // rendezvous deadline
inline constexpr const char* kUnexpectedCap = "RLX_UNEXPECTED_BYTES";    // early-message memory cap
inline constexpr const char* kTcpLanes = "RLX_TCP_LANES";  // TCP streams per pair for collectives
// auto | system | an algorithm's name (transport/congestion_control.h)
inline constexpr const char* kTcpCongestion = "RLX_TCP_CONGESTION";
// Set by Open MPI's mpirun.
inline constexpr const char* kOmpiRank = "OMPI_COMM_WORLD_RANK";
inline constexpr const char* kOmpiWorldSize = "OMPI_COMM_WORLD_SIZE";
// Process counts that other launchers set (rlx cannot join their groups yet,
// but must not let their processes run as unrelated groups of one): PMI
// (MPICH's hydra, Slurm's pmi2), Slurm's srun, torchrun and its imitators.
inline constexpr const char* kForeignSizes[] = {"PMI_SIZE", "SLURM_STEP_NUM_TASKS", "WORLD_SIZE"};

inline constexpr std::chrono::milliseconds kDefaultTimeout{300'000};
inline constexpr std::chrono::milliseconds kDefaultConnectTimeout{60'000};
inline constexpr std::size_t kDefaultUnexpectedCap = std::size_t{1} << 30;
inline constexpr int kDefaultTcpLanes = 2;

// Everything init needs to know, parsed and validated.
struct LaunchEnv {
  std::optional<int> rank;  // RLX_RANK and RLX_WORLD_SIZE come together or not at all
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::optional<int> local_size;
  std::string coordinator;
  std::string job_token;
  std::string backend;  // empty when unset
  std::string hostfile;
  std::string ifname;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::chrono::milliseconds connect_timeout = kDefaultConnectTimeout;
  std::size_t unexpected_bytes_cap = kDefaultUnexpectedCap;
  int tcp_lanes = kDefaultTcpLanes;
  std::string tcp_congestion;  // empty when unset (auto)
  std::optional<int> mpi_rank;
  std::optional<int> mpi_world_size;
  // The first of kForeignSizes that says more than one process was started,
  // as "NAME=value"; empty when none does. Values that are not numbers are
  // not rlx's to judge and are ignored.
  std::string foreign_launcher;

  // True when rlxrun (or a user imitating it) started this process.
  bool launched_by_rlxrun() const { return world_size.has_value(); }
  // True when Open MPI's mpirun started this process.
  bool launched_by_mpirun() const { return mpi_world_size.has_value(); }
};

// Where a failure before the group exists happened: this rank, its group
// size (from the settings) and `operation`.
ErrorSite startup_site(const LaunchEnv& env, std::string operation);

// Looks a variable up; returns nullptr when it is unset.
using Lookup = std::function<const char*(const char* name)>;

// Parses the variables above. Malformed values throw CollectiveError
// (invalid_argument) naming the variable, its value and what is expected.
LaunchEnv parse(const Lookup& lookup);

// parse() over the process environment.
LaunchEnv from_process_environment();

// True when `ranks_on_host` ranks outnumber this host's hardware threads, so
// they take turns on its cores: collectives then wait by yielding the core
// (tcp::LaneLinks) and trust the shared-cores cost model (all_reduce).
bool ranks_share_cores(int ranks_on_host);

}  // namespace rlx::launch_env
