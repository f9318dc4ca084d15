// The contract between a launcher (rlxrun, or Open MPI's mpirun) and the
// library, and rlx's one settings object: every RLX_* variable a rank reads is
// named here and parsed once, by parse(), into a LaunchEnv that rlx::init
// passes down to the backend it starts (and the backend to the collectives).
// No other code reads the environment. rlxrun writes the group's variables
// and parses the rest to refuse bad values before any rank starts.
// docs/SETTINGS.md lists every variable with its default and its reader.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/transport/errors.h"
#include "rlx/transport/log.h"
#include "rlx/transport/tune_rules.h"

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
// The address this rank listens on and is reached at (rlxrun sets it from a
// hostfile's "ips"); wins over RLX_IFNAME.
inline constexpr const char* kHostAddress = "RLX_HOST_ADDRESS";
inline constexpr const char* kTimeout = "RLX_TIMEOUT_S";  // deadline of every operation (s)
inline constexpr const char* kConnectTimeout = "RLX_CONNECT_TIMEOUT_S";  // rendezvous deadline
inline constexpr const char* kUnexpectedCap = "RLX_UNEXPECTED_BYTES";    // early-message memory cap
inline constexpr const char* kTcpLanes = "RLX_TCP_LANES";  // TCP streams per pair for collectives
// auto | system | an algorithm's name (rlx/transport/congestion_control.h)
inline constexpr const char* kTcpCongestion = "RLX_TCP_CONGESTION";
// How collectives choose their algorithms (rlx/collectives/tuning.h).
inline constexpr const char* kAllReduceAlgorithm = "RLX_ALL_REDUCE_ALGORITHM";  // auto|ring|...
inline constexpr const char* kCostModel = "RLX_COST_MODEL";  // a file bench/scaling writes
inline constexpr const char* kTune = "RLX_TUNE";  // algorithms by size (rlx/transport/tune_rules.h)
// 0 turns the same-host shared-memory path off (TCP/verbs to every peer).
inline constexpr const char* kShm = "RLX_SHM";
// What rlx prints: debug | info | warn (rlx/transport/log.h).
inline constexpr const char* kLog = "RLX_LOG";
// "1" when the launcher tags each line of output with its rank (rlxrun
// does, unless --no-tag-output): rlx's own lines then leave the rank out.
inline constexpr const char* kOutputTagged = "RLX_OUTPUT_TAGGED";
// The flight recorder (rlx/transport/call_record.h): how many calls each
// process keeps, and where it dumps them (rlxrun sets a directory of its own).
inline constexpr const char* kRecordCalls = "RLX_RECORD_CALLS";
inline constexpr const char* kDumpDir = "RLX_DUMP_DIR";
// Touching this file in the dump directory asks every rank that dumps there
// for its record (each rank's service thread looks every 10 ms): how rlxrun
// asks, without sending a signal to processes it cannot vouch for.
inline constexpr std::string_view kDumpRequestFile = ".dump-request";
// Where each rank writes its calls as a Chrome trace (trace-rank-R.json),
// and rlxrun the job's merged trace (trace.json).
inline constexpr const char* kTrace = "RLX_TRACE";
inline constexpr std::string_view kTraceFilePrefix = "trace-rank-";
inline constexpr std::string_view kMergedTraceFile = "trace.json";
// The verbs backend's device choice and waiting (rlx/backends/verbs/).
inline constexpr const char* kIbDevice = "RLX_IB_DEVICE";       // e.g. mlx5_0, rxe0
inline constexpr const char* kIbPort = "RLX_IB_PORT";           // 1-based port number
inline constexpr const char* kIbGidIndex = "RLX_IB_GID_INDEX";  // index in the port's GID table
inline constexpr const char* kVerbsSpin = "RLX_VERBS_SPIN_US";  // caller's spin before sleeping
// Set by Open MPI's mpirun.
inline constexpr const char* kOmpiRank = "OMPI_COMM_WORLD_RANK";
inline constexpr const char* kOmpiWorldSize = "OMPI_COMM_WORLD_SIZE";
// Set by torchrun and the launchers that imitate it (Kubernetes training
// operators, Ray, ...): rank 0 hosts the rendezvous on MASTER_ADDR:MASTER_PORT.
inline constexpr const char* kTorchRank = "RANK";
inline constexpr const char* kTorchWorldSize = "WORLD_SIZE";
inline constexpr const char* kTorchLocalRank = "LOCAL_RANK";
inline constexpr const char* kTorchLocalSize = "LOCAL_WORLD_SIZE";
inline constexpr const char* kMasterAddr = "MASTER_ADDR";
inline constexpr const char* kMasterPort = "MASTER_PORT";
inline constexpr const char* kTorchRunId = "TORCHELASTIC_RUN_ID";
// Set by MLX's launcher (mlx.launch, ring backend): MLX_HOSTFILE is the
// static table of every rank's endpoints (a JSON list, as RLX_HOSTFILE).
inline constexpr const char* kMlxRank = "MLX_RANK";
inline constexpr const char* kMlxHostfile = "MLX_HOSTFILE";
inline constexpr const char* kMlxWorldSize = "MLX_WORLD_SIZE";
// Set by every PMIx server for its clients (srun --mpi=pmix, mpirun,
// prterun): the size and the endpoints then come from the server (rlx::init).
inline constexpr const char* kPmixRank = "PMIX_RANK";
inline constexpr const char* kPmixNamespace = "PMIX_NAMESPACE";
// Process counts that other launchers set (rlx cannot join their groups yet,
// but must not let their processes run as unrelated groups of one): PMI
// (MPICH's hydra, Slurm's pmi2), Slurm's srun.
inline constexpr const char* kForeignSizes[] = {"PMI_SIZE", "SLURM_STEP_NUM_TASKS"};

// What a launcher sets for each rank: its place in the group (any launcher's
// rank and size), how it meets the others (rendezvous, static table, job
// token) and the address it listens on. Settings that every rank gets alike
// (a hostfile's "envs") must not set these: RLX_RANK=0 there turned
// `rlxrun -n 2` into two groups of one.
inline constexpr const char* kPerRankVariables[] = {
    kRank,       kWorldSize,      kLocalRank,       kLocalSize,      kCoordinator,
    kJobToken,   kHostfile,       kHostAddress,     kOmpiRank,       kOmpiWorldSize,
    kTorchRank,  kTorchWorldSize, kTorchLocalRank,  kTorchLocalSize, kMasterAddr,
    kMasterPort, kTorchRunId,     kMlxRank,         kMlxHostfile,    kMlxWorldSize,
    kPmixRank,   kPmixNamespace,  kForeignSizes[0], kForeignSizes[1]};
bool is_per_rank_variable(std::string_view name);

inline constexpr std::chrono::milliseconds kDefaultTimeout{300'000};
inline constexpr std::chrono::milliseconds kDefaultConnectTimeout{60'000};
inline constexpr std::size_t kDefaultUnexpectedCap = std::size_t{1} << 30;
inline constexpr int kDefaultTcpLanes = 2;
inline constexpr std::size_t kDefaultRecordedCalls = 2048;
inline constexpr std::size_t kMaxRecordedCalls = 10000;
// A dump holds at most this many calls, the newest of every thread's, which
// keeps it well within what rlxrun and rlx-analyze read back (4 MiB).
inline constexpr std::size_t kMaxDumpedCalls = 10000;

struct RecordSettings {
  std::size_t entries = kDefaultRecordedCalls;
  std::string dump_dir;   // empty: no dumps
  std::string trace_dir;  // empty: no trace
};

// RLX_ALL_REDUCE_ALGORITHM: forced, or chosen by size through the cost model.
enum class AllReduceAlgorithm : std::uint8_t { by_size, ring, recursive_doubling };

struct VerbsSettings {
  std::string device;                                    // empty: automatic
  int port = 0;                                          // 0: the first active port
  std::optional<int> gid_index;                          // none: prefer a RoCE v2 IPv4 GID
  std::optional<std::chrono::microseconds> caller_spin;  // none: the engine's default
};

// What told this process its rank and group, in the order parse() looks:
// the first that is set wins (a partial set is an error, never skipped).
enum class GroupSource : std::uint8_t {
  none,      // nothing: a group of one, or mpirun's (mpi_world_size)
  rlx,       // RLX_RANK, RLX_WORLD_SIZE (rlxrun, or by hand)
  mlx,       // MLX_RANK, MLX_HOSTFILE (mlx.launch)
  torchrun,  // RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
  pmix,      // PMIX_RANK, PMIX_NAMESPACE: the size comes from the PMIx server
};
std::string_view name_of(GroupSource source);

// Everything init needs to know, parsed and validated.
struct LaunchEnv {
  GroupSource group_source = GroupSource::none;
  // torchrun-style rank 0: runs the rendezvous server on coordinator's port.
  bool hosts_rendezvous = false;
  // From group_source. With MLX_RANK and no MLX_WORLD_SIZE, world_size is
  // the length of the table in MLX_HOSTFILE, which rlx::init reads; with
  // PMIx, the server's job size, which rlx::init asks for.
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<int> local_rank;
  std::optional<int> local_size;
  std::string coordinator;
  std::string job_token;
  std::string backend;  // empty when unset
  std::string hostfile;
  std::string ifname;
  std::string host_address;
  std::chrono::milliseconds timeout = kDefaultTimeout;
  std::chrono::milliseconds connect_timeout = kDefaultConnectTimeout;
  std::size_t unexpected_bytes_cap = kDefaultUnexpectedCap;
  int tcp_lanes = kDefaultTcpLanes;
  std::string tcp_congestion;  // empty when unset (auto)
  AllReduceAlgorithm all_reduce_algorithm = AllReduceAlgorithm::by_size;
  std::string cost_model_file;  // empty: the constants compiled in
  std::vector<TuneRule> tune;   // RLX_TUNE's rules, in the order written
  bool shm = true;              // RLX_SHM: ranks of one host share memory
  LogLevel log_level = LogLevel::warn;
  bool output_tagged = false;  // RLX_OUTPUT_TAGGED
  RecordSettings record;
  VerbsSettings verbs;
  std::optional<int> mpi_rank;
  std::optional<int> mpi_world_size;
  // The first of kForeignSizes that says more than one process was started,
  // as "NAME=value"; empty when none does. Values that are not numbers are
  // not rlx's to judge and are ignored.
  std::string foreign_launcher;

  // True when rlxrun, mlx.launch or torchrun (or a user imitating one)
  // gave this process a rank: rlx's own network backends connect it.
  bool launched_by_rlxrun() const { return world_size.has_value(); }
  // True when Open MPI's mpirun started this process.
  bool launched_by_mpirun() const { return mpi_world_size.has_value(); }
  // Ranks on this host: RLX_LOCAL_SIZE, else the whole group (the cautious guess).
  int ranks_here() const { return local_size.value_or(world_size.value_or(1)); }
};

// Where a failure before the group exists happened: this rank, its group
// size (from the settings) and `operation`.
ErrorSite startup_site(const LaunchEnv& env, std::string operation);

// Looks a variable up; returns nullptr when it is unset.
using Lookup = std::function<const char*(const char* name)>;

// Parses the variables above. Malformed values throw CollectiveError
// (invalid_argument) naming the variable, its value and what is expected.
LaunchEnv parse(const Lookup& lookup);

// RLX_RECORD_CALLS, RLX_DUMP_DIR and RLX_TRACE alone (the record reads them at its
// first use, which may come before parse()); throws as parse() does.
RecordSettings record_settings(const Lookup& lookup);

// parse() over the process environment.
LaunchEnv from_process_environment();

// True when `ranks_on_host` ranks outnumber this host's hardware threads, so
// they take turns on its cores: collectives then wait by yielding the core
// (tcp::LaneLinks) and trust the shared-cores cost model (all_reduce).
bool ranks_share_cores(int ranks_on_host);

}  // namespace rlx::launch_env
