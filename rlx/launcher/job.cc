#include "rlx/launcher/job.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rlx/launcher/agent_request.h"
#include "rlx/launcher/hostfile.h"
#include "rlx/launcher/job_record.h"
#include "rlx/launcher/local_process.h"
#include "rlx/launcher/master_endpoint.h"
#include "rlx/launcher/output.h"
#include "rlx/launcher/remote_launch.h"
#include "rlx/launcher/slurm_allocation.h"
#include "rlx/launcher/start_progress.h"
#include "rlx/launcher/stdin_relay.h"
#include "rlx/transport/auth.h"
#include "rlx/transport/endpoint.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/rendezvous/server.h"
#include "rlx/transport/shm/segment.h"

namespace rlx::launcher {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kKillGrace = std::chrono::seconds(5);
// After a rank fails, how long the others have to report the failure (which
// reaches them within milliseconds) and exit on their own before SIGTERM, so
// their own errors are not lost.
constexpr auto kReportGrace = std::chrono::seconds(1);
// How long ranks asked for their flight record have to write it.
constexpr std::chrono::milliseconds kDumpGrace{300};
// After the last rank exits, output still in flight is read for this long.
constexpr auto kDrainGrace = std::chrono::seconds(1);

bool is_rlx_variable(std::string_view entry) {
  return entry.starts_with("RLX_") || entry.starts_with("OMPI_COMM_WORLD_");
}

// What rlxrun sets for each rank and job, so never passes on from its own
// environment (RLX_BACKEND and RLX_IFNAME do, unless a flag sets them).
bool is_per_job_variable(std::string_view entry) {
  return launch_env::is_per_rank_variable(entry.substr(0, entry.find('=')));
}

// The RLX_* settings of rlxrun's own environment (RLX_TIMEOUT_S, ...), which
// every rank, local or remote, gets as rlxrun has them.
std::vector<std::string> inherited_settings() {
  std::vector<std::string> settings;
  for (const std::string& entry : environment_with({}, nullptr)) {
    if (entry.starts_with("RLX_") && !is_per_job_variable(entry)) settings.push_back(entry);
  }
  return settings;
}

// rlxrun's RLX_ settings, then this rank's (rlx's, and torchrun's names for
// frameworks that read those), then the hostfile's "envs", then the user's
// --env (later wins).
std::vector<std::string> rank_variables(const Options& options, int rank,
                                        const Placement& placement, const std::string& token,
                                        const std::string& coordinator,
                                        const MasterEndpoint& master) {
  std::vector<std::string> env = inherited_settings();
  auto set = [&env](const char* name, const std::string& value) {
    const std::string prefix = std::string(name) + "=";
    std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(prefix); });
    env.push_back(prefix + value);
  };
  set(launch_env::kRank, std::to_string(rank));
  set(launch_env::kWorldSize, std::to_string(options.num_ranks));
  set(launch_env::kLocalRank, std::to_string(placement.local_rank));
  set(launch_env::kLocalSize, std::to_string(placement.local_size));
  set(launch_env::kTorchRank, std::to_string(rank));
  set(launch_env::kTorchWorldSize, std::to_string(options.num_ranks));
  set(launch_env::kTorchLocalRank, std::to_string(placement.local_rank));
  set(launch_env::kTorchLocalSize, std::to_string(placement.local_size));
  set(launch_env::kMasterAddr, master.address);
  set(launch_env::kMasterPort, master.port);
  if (!options.backend.empty()) {
    set(launch_env::kBackend, options.backend);
  } else if (std::getenv(launch_env::kBackend) == nullptr) {
    set(launch_env::kBackend, "tcp");
  }
  set(launch_env::kOutputTagged, options.tag_output ? "1" : "0");
  set(launch_env::kJobToken, token);
  set(launch_env::kCoordinator, coordinator);
  if (!options.ifname.empty()) set(launch_env::kIfname, options.ifname);
  if (!placement.address.empty()) set(launch_env::kHostAddress, placement.address);
  for (const std::string& entry : placement.envs) {
    const auto eq = entry.find('=');
    set(entry.substr(0, eq).c_str(), entry.substr(eq + 1));
  }
  for (const auto& [name, value] : options.env) set(name.c_str(), value);
  return env;
}

std::string current_directory() {
  char path[4096];
  return getcwd(path, sizeof path) != nullptr ? path : "";
}

// Where the rendezvous listens: loopback for a job on this machine only;
// otherwise --ifname's address, or the one that routes to the first remote host.
// Every remote host must resolve and be routable (source_address_towards
// throws naming it otherwise), before any rank starts.
std::string rendezvous_host(const Options& options, const std::vector<Placement>& placements) {
  std::optional<std::string> towards_first_remote;
  std::set<std::string> checked;
  for (const auto& where : placements) {
    if (!checked.insert(where.host).second || is_local_host(where.host)) continue;
    const std::string source = source_address_towards(where.host);
    if (!towards_first_remote) towards_first_remote = source;
  }
  if (!towards_first_remote) return "127.0.0.1";
  return options.ifname.empty() ? *towards_first_remote : interface_address(options.ifname);
}

// The settings the ranks will read (RLX_CONNECT_TIMEOUT_S, RLX_TCP_LANES, ...),
// parsed by the library's own parser from what rank_variables gives them
// (rank 0's, with the hostfile's "envs" once it is read), so a malformed
// value is an error before any rank starts.
launch_env::LaunchEnv rank_settings(const Options& options,
                                    const Placement& first = {.local_size = 1}) {
  const auto variables = rank_variables(options, 0, first, "", "", {});
  return launch_env::parse([&](const char* name) -> const char* {
    const std::string prefix = std::string(name) + "=";
    for (const auto& entry : variables) {
      if (entry.starts_with(prefix)) return entry.c_str() + prefix.size();
    }
    return nullptr;
  });
}

// Files this system can still open: fs.file-max less those open now.
std::optional<std::uint64_t> system_files_left() {
  std::ifstream max_file("/proc/sys/fs/file-max");
  std::ifstream open_now("/proc/sys/fs/file-nr");
  std::uint64_t max = 0;
  std::uint64_t used = 0;
  if (!(max_file >> max) || !(open_now >> used) || used > max) return std::nullopt;
  return max - used;
}

// Every TCP rank holds 1 + RLX_TCP_LANES connections to each other rank. A
// job whose local ranks cannot open that many files would fail only at the
// connect deadline, with a different error on each rank: refuse it now.
void check_descriptor_budget(const Options& options, const std::vector<Placement>& placements,
                             const launch_env::LaunchEnv& settings) {
  if (settings.backend != "tcp" && settings.backend != "any") return;
  const auto local_ranks = static_cast<std::uint64_t>(
      std::count_if(placements.begin(), placements.end(),
                    [](const Placement& p) { return is_local_host(p.host); }));
  if (local_ranks == 0) return;
  constexpr std::uint64_t kProgramsOwn = 64;  // stdio, the progress thread's, the program's files
  const auto others = static_cast<std::uint64_t>(options.num_ranks - 1);
  const std::uint64_t per_rank =
      static_cast<std::uint64_t>(1 + settings.tcp_lanes) * others + kProgramsOwn;
  const std::string why = " (1 + RLX_TCP_LANES = " + std::to_string(1 + settings.tcp_lanes) +
                          " connections to each of the other " + std::to_string(others) + " ranks)";
  const std::string fixes = ": lower RLX_TCP_LANES or start fewer ranks per host";
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY &&
      per_rank > files.rlim_cur) {
    throw std::runtime_error(std::to_string(options.num_ranks) + " ranks need about " +
                             std::to_string(per_rank) + " open files each" + why +
                             ", above the limit of " + std::to_string(files.rlim_cur) +
                             " (ulimit -n)" + fixes + ", or raise the limit");
  }
  const auto left = system_files_left();
  if (left && local_ranks * per_rank > *left) {
    throw std::runtime_error(std::to_string(local_ranks) + " ranks on this host need about " +
                             std::to_string(local_ranks * per_rank) + " open files together" + why +
                             ", more than the " + std::to_string(*left) +
                             " the system has left (fs.file-max)" + fixes);
  }
}

}  // namespace

namespace {

const char* from_environment(const char* name) { return std::getenv(name); }

// Inside a Slurm allocation, with no host list of the user's: the
// allocation's hosts, and srun (not ssh) reaches them unless --rsh says.
bool uses_slurm_allocation(const Options& options) {
  return options.hostfile.empty() && options.host_list.empty() &&
         from_environment("SLURM_JOB_NODELIST") != nullptr;
}

// The command that starts rlxrun's agent on `host`.
std::vector<std::string> agent_argv(const Options& options, const std::string& host) {
  if (options.rsh.empty() && uses_slurm_allocation(options)) {
    return srun_agent_argv(host, this_executable());
  }
  const auto rsh = options.rsh.empty() ? split_command_words(kDefaultRsh, "--rsh") : options.rsh;
  return remote_agent_argv(rsh, host, this_executable());
}

}  // namespace

namespace {

// A rank's place among the ranks of its machine, where binding hands out
// cores: a host list may name one machine twice ("-H a,a", or localhost and
// this host's name), and each entry's local ranks start from 0.
void assign_binding_slots(std::vector<Placement>& placements) {
  auto machine_of = [](const Placement& p) { return is_local_host(p.host) ? "" : p.host; };
  std::map<std::string, int> ranks_on;
  for (const Placement& p : placements) ++ranks_on[machine_of(p)];
  std::map<std::string, int> next;
  for (Placement& p : placements) {
    const std::string machine = machine_of(p);
    p.binding_slot = next[machine]++;
    p.binding_slots = ranks_on[machine];
  }
}

}  // namespace

std::vector<Placement> plan_placement(Options& options) {
  HostList list{{{"localhost", options.num_ranks, std::nullopt, {}}}, {}};
  if (uses_slurm_allocation(options)) list.hosts = *slurm_allocation(from_environment);
  if (!options.hostfile.empty()) {
    list = read_hostfile(options.hostfile, rank_settings(options).connect_timeout);
  }
  if (!options.host_list.empty()) list = {parse_host_list(options.host_list), {}};
  if (options.num_ranks == 0) {  // no -n: a rank per slot, as mpirun
    long long slots = 0;
    for (const HostSlots& host : list.hosts) slots += host.slots;
    if (slots < 1 || slots > kMaxRanks) {
      throw HostfileError("the host list has " + std::to_string(slots) +
                          " slots: give -n N (1 to " + std::to_string(kMaxRanks) + ")");
    }
    options.num_ranks = static_cast<int>(slots);
  }
  auto placements =
      place_ranks(list.hosts, options.num_ranks, options.oversubscribe, options.map_by);
  for (Placement& placement : placements) placement.envs = list.envs;
  assign_binding_slots(placements);
  const CpuTopology topology = this_host_topology();
  for (Placement& placement : placements) {
    // Remote ranks' agents bind them, by their own host's cores.
    if (is_local_host(placement.host)) {
      placement.cpus =
          cpus_for_rank(options.bind_to, placement.binding_slot, placement.binding_slots, topology);
    }
  }
  return placements;
}

namespace {

std::string describe_status(int status, bool remote) {
  // ssh's own failures (unreachable host, refused key) exit 255.
  if (remote && WIFEXITED(status) && WEXITSTATUS(status) == 255) {
    return "exited with status 255 (the remote shell failed: check that '--rsh HOST true' "
           "works without a password)";
  }
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

int exit_code_of(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void say(const std::string& message) { write_all(STDERR_FILENO, "rlxrun: " + message + "\n"); }

int open_copy_file(const std::string& dir, int rank, const char* stream) {
  const std::string path = dir + "/rank." + std::to_string(rank) + "." + stream;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw std::runtime_error("--output-dir: cannot write " + path + ": " + strerror(errno));
  return fd;
}

// Every rank's stdout and stderr copy under --output-dir (-1 without it),
// opened before any rank starts, so a directory that cannot take them is a
// command-line error and not a half-started job.
std::vector<std::array<int, 2>> open_copy_files(const Options& options) {
  std::vector<std::array<int, 2>> fds(static_cast<std::size_t>(options.num_ranks), {-1, -1});
  if (options.output_dir.empty()) return fds;
  if (mkdir(options.output_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw std::runtime_error("--output-dir: cannot create " + options.output_dir + ": " +
                             strerror(errno));
  }
  try {
    for (int r = 0; r < options.num_ranks; ++r) {
      fds[static_cast<std::size_t>(r)] = {open_copy_file(options.output_dir, r, "out"),
                                          open_copy_file(options.output_dir, r, "err")};
    }
  } catch (...) {
    for (auto& pair : fds) {
      for (int fd : pair) {
        if (fd >= 0) close(fd);
      }
    }
    throw;
  }
  return fds;
}

struct RankState {
  int rank = 0;
  std::string host;
  bool remote = false;  // pid is then the local ssh client that runs the rank's agent
  pid_t pid = -1;
  bool running = false;
  bool exited_ok = false;  // exited with status 0
  int stopped_by = 0;      // the signal that stopped it (SIGSTOP, ...), 0 while it runs
  int fds[2] = {-1, -1};   // stdout, stderr read ends; -1 once closed
  std::unique_ptr<TaggedOutput> outputs[2];
};

class Job {
 public:
  Job(const Options& options, std::vector<Placement> placements)
      : options_(options), placements_(std::move(placements)) {}
  int run();

 private:
  void start_ranks(const std::string& rendezvous_address, std::chrono::milliseconds connect_timeout,
                   std::vector<std::array<int, 2>> copy_fds);
  ChildProcess start_rank(int rank, const std::string& token, const std::string& coordinator);
  void show_start_progress();
  void loop();
  void poll_once();
  void read_output(RankState& rank, int stream);
  void handle_signals();
  // SIGUSR1: asks the running ranks for their record, then prints what each
  // is doing (print_status, kDumpGrace later) while the job goes on.
  void ask_for_status();
  void print_status();
  void reap();
  // Ends the job with `exit_code`: the running ranks get `grace` to exit on
  // their own, then SIGTERM, then SIGKILL after kKillGrace.
  // With `ask_for_dumps` (a failed rank, --timeout), the running ranks are
  // asked for their flight record first, and given kDumpGrace at least.
  void stop_all(const std::string& why, int exit_code,
                std::chrono::milliseconds grace = std::chrono::milliseconds(0),
                bool ask_for_dumps = false);
  void terminate_running();
  std::string describe_stopped() const;
  // Arms stranded_deadline_ while every running rank is stopped by a signal.
  void watch_for_stranded_ranks();
  void check_deadlines();
  std::optional<Clock::time_point> next_deadline() const;
  bool anything_running() const;
  bool output_open() const;

  const Options& options_;
  const std::vector<Placement> placements_;
  std::unique_ptr<rendezvous::Server> rendezvous_;
  // Before what writes to it: the start progress and the ranks' output.
  StatusLine status_line_{isatty(STDERR_FILENO) != 0};
  std::unique_ptr<StartProgress> progress_;
  StdinRelay stdin_relay_;
  std::vector<RankState> ranks_;
  int signal_fd_ = -1;
  int exit_code_ = 0;
  std::string token_;      // the job's, once its ranks start
  MasterEndpoint master_;  // torchrun's MASTER_ADDR and MASTER_PORT
  bool stopping_ = false;
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> term_deadline_;
  std::optional<Clock::time_point> kill_deadline_;
  std::optional<Clock::time_point> drain_deadline_;
  std::optional<Clock::time_point> status_deadline_;  // SIGUSR1 asked the ranks: when to answer
  // Every running rank is stopped by a signal: when to end the job.
  std::optional<Clock::time_point> stranded_deadline_;
  std::chrono::milliseconds rank_timeout_{};  // the ranks' RLX_TIMEOUT_S
  std::optional<JobRecord> record_;           // where local ranks dump their flight record
};

int Job::run() {
  // Everything a command line or hostfile can get wrong is found before any
  // rank starts, and exits 2 like the option parser's errors.
  std::string rendezvous_address;
  std::chrono::milliseconds connect_timeout{};
  std::vector<std::array<int, 2>> copy_fds;
  try {
    rendezvous_address = rendezvous_host(options_, placements_);
    const launch_env::LaunchEnv settings = rank_settings(options_, placements_.front());
    check_descriptor_budget(options_, placements_, settings);
    record_.emplace(settings.record.dump_dir, settings.record.trace_dir, options_.cwd);
    connect_timeout = settings.connect_timeout;
    rank_timeout_ = settings.timeout;
    copy_fds = open_copy_files(options_);
  } catch (const std::exception& error) {
    say(error.what());
    return 2;
  }
  signal_fd_ = watch_process_signals();
  if (options_.job_timeout) job_deadline_ = Clock::now() + *options_.job_timeout;
  try {
    start_ranks(rendezvous_address, connect_timeout, std::move(copy_fds));
  } catch (const std::exception& error) {
    stop_all(error.what(), 127);
  }
  loop();
  close(signal_fd_);
  // Every rank has ended: what remains (the analysis, merging traces) may
  // take a while, and Ctrl-C must still end it.
  stop_watching_process_signals();
  if (exit_code_ != 0) {
    // Only a local rank that did not end well is missed: remote ranks dump
    // on their own hosts, and a rank that exited 0 had nothing to report.
    std::set<int> missing_matters;
    for (const auto& rank : ranks_) {
      if (!rank.remote && !rank.exited_ok) missing_matters.insert(rank.rank);
    }
    for (const auto& line : record_->findings(options_.num_ranks, missing_matters)) {
      say("flight record: " + line);
    }
  }
  for (const auto& line : record_->merge_trace()) say(line);
  // Ranks unlink their shared memory once every peer mapped it; a job that
  // failed before then leaves names behind. Every rank has ended here.
  if (!token_.empty()) shm::remove_job_segments(shm::kDefaultDirectory, token_);
  return exit_code_;
}

void Job::start_ranks(const std::string& rendezvous_address,
                      std::chrono::milliseconds connect_timeout,
                      std::vector<std::array<int, 2>> copy_fds) {
  // An earlier job (or rlxrun) killed during set-up may have left segments
  // that no process of its own will remove.
  shm::remove_orphaned_segments(shm::kDefaultDirectory);
  token_ = auth::fresh_token();
  const std::string& token = token_;
  // rlxrun hosts the rendezvous: it knows its own address, so there is no
  // port to guess, and it can name ranks that never arrive.
  rendezvous_ = std::make_unique<rendezvous::Server>(options_.num_ranks, token, rendezvous_address);
  const std::string coordinator = rendezvous_->address().to_string();
  master_ = master_endpoint(placements_.front(), rendezvous_address);
  ranks_.resize(static_cast<std::size_t>(options_.num_ranks));
  std::vector<std::string> hosts;
  for (int r = 0; r < options_.num_ranks; ++r) {
    RankState& state = ranks_[static_cast<std::size_t>(r)];
    state.rank = r;
    state.host = placements_[static_cast<std::size_t>(r)].host;
    state.remote = !is_local_host(state.host);
    hosts.push_back(state.host);
    // The output first: a rank that fails to start still has its streams' state.
    const auto [out_copy, err_copy] = copy_fds[static_cast<std::size_t>(r)];
    copy_fds[static_cast<std::size_t>(r)] = {-1, -1};
    const LinePrefix prefix{.rank = options_.tag_output, .time = options_.timestamp_output};
    state.outputs[0] =
        std::make_unique<TaggedOutput>(r, prefix, STDOUT_FILENO, out_copy, &status_line_);
    state.outputs[1] =
        std::make_unique<TaggedOutput>(r, prefix, STDERR_FILENO, err_copy, &status_line_);
    const ChildProcess child = start_rank(r, token, coordinator);
    state.pid = child.pid;
    state.running = true;
    state.fds[0] = child.stdout_fd;
    state.fds[1] = child.stderr_fd;
  }
  progress_ = std::make_unique<StartProgress>(std::move(hosts), connect_timeout, status_line_);
}

// A local rank is forked here; a remote one is the ssh client that runs
// `rlxrun --remote-agent` there, told the rank's environment through stdin.
ChildProcess Job::start_rank(int rank, const std::string& token, const std::string& coordinator) {
  const RankState& state = ranks_[static_cast<std::size_t>(rank)];
  const Placement& placement = placements_[static_cast<std::size_t>(rank)];
  const auto variables = rank_variables(options_, rank, placement, token, coordinator, master_);
  if (!state.remote) {
    auto local_variables = variables;
    if (auto dump_dir = record_->variable()) local_variables.push_back(*dump_dir);
    return spawn_local({.argv = options_.program,
                        .environment = environment_with(local_variables, is_rlx_variable),
                        .cwd = options_.cwd,
                        .stdin_mode = rank == 0 ? StdinMode::inherit : StdinMode::null,
                        .cpus = placement.cpus});
  }
  ChildProcess child = spawn_local({.argv = agent_argv(options_, state.host),
                                    .environment = environment_with({}, is_rlx_variable),
                                    .stdin_mode = StdinMode::pipe});
  const AgentRequest request{.environment = variables,
                             .cwd = options_.cwd.empty() ? current_directory() : options_.cwd,
                             .argv = options_.program,
                             .bind_to = options_.bind_to,
                             .local_rank = placement.binding_slot,
                             .local_size = placement.binding_slots};
  write_all(child.stdin_fd, encode_agent_request(request));
  if (rank == 0) {
    stdin_relay_.start(child.stdin_fd);
  } else {
    close(child.stdin_fd);
  }
  return child;
}

void Job::show_start_progress() {
  if (!progress_) return;
  if (stopping_) {
    progress_->stop();
  } else {
    progress_->update(rendezvous_->registered(), [this] { return rendezvous_->missing(); });
  }
}

void Job::loop() {
  while (anything_running() || output_open()) {
    if (!anything_running() && !drain_deadline_) drain_deadline_ = Clock::now() + kDrainGrace;
    if (drain_deadline_ && Clock::now() >= *drain_deadline_) break;
    poll_once();
    check_deadlines();
    show_start_progress();
  }
  for (auto& rank : ranks_) {
    for (int stream = 0; stream < 2; ++stream) {
      if (rank.fds[stream] >= 0) close(rank.fds[stream]);
      if (rank.outputs[stream]) rank.outputs[stream]->finish();
    }
  }
}

void Job::poll_once() {
  std::vector<pollfd> fds{{signal_fd_, POLLIN, 0}};
  std::vector<std::pair<RankState*, int>> owners{{nullptr, 0}};
  for (auto& rank : ranks_) {
    for (int stream = 0; stream < 2; ++stream) {
      if (rank.fds[stream] < 0) continue;
      fds.push_back({rank.fds[stream], POLLIN, 0});
      owners.emplace_back(&rank, stream);
    }
  }
  fds.push_back(stdin_relay_.wanted());
  int timeout_ms = -1;
  if (auto deadline = next_deadline()) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now());
    timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
  }
  if (progress_ && !stopping_) {
    timeout_ms = timeout_ms < 0
                     ? static_cast<int>(StartProgress::kRefresh.count())
                     : std::min(timeout_ms, static_cast<int>(StartProgress::kRefresh.count()));
  }
  if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
    throw std::runtime_error(std::string("poll: ") + strerror(errno));
  }
  if (fds[0].revents != 0) handle_signals();
  for (std::size_t i = 1; i + 1 < fds.size(); ++i) {
    if (fds[i].revents != 0) read_output(*owners[i].first, owners[i].second);
  }
  stdin_relay_.on_ready(fds.back().revents);
}

void Job::read_output(RankState& rank, int stream) {
  char buffer[65536];
  const ssize_t n = read(rank.fds[stream], buffer, sizeof buffer);
  if (n > 0) {
    rank.outputs[stream]->feed({buffer, static_cast<std::size_t>(n)});
  } else if (n == 0 || errno != EINTR) {
    close(rank.fds[stream]);
    rank.fds[stream] = -1;
    rank.outputs[stream]->finish();
  }
}

void Job::handle_signals() {
  signalfd_siginfo info;
  while (read(signal_fd_, &info, sizeof info) == sizeof info) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) {
      reap();
    } else if (sig == SIGUSR1) {
      ask_for_status();
    } else {
      stop_all(std::string("received SIG") + sigabbrev_np(sig), 128 + sig);
    }
  }
}

void Job::ask_for_status() {
  if (stopping_ || status_deadline_) return;
  if (!record_ || !record_->ask_for_dumps()) {
    say("status: no flight record directory to ask the ranks through");
    return;
  }
  status_deadline_ = Clock::now() + kDumpGrace;
}

void Job::print_status() {
  status_deadline_.reset();
  for (const auto& line : record_->status(options_.num_ranks)) say("status: " + line);
}

void Job::reap() {
  int status = 0;
  for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG | WUNTRACED | WCONTINUED)) > 0;) {
    for (auto& rank : ranks_) {
      if (rank.pid != pid) continue;
      if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
        rank.stopped_by = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
        continue;
      }
      rank.running = false;
      const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      rank.exited_ok = !failed;
      if (failed && !stopping_) {
        const std::string where =
            rank.remote ? "on " + rank.host : "pid " + std::to_string(pid) + " on " + rank.host;
        stop_all("rank " + std::to_string(rank.rank) + " (" + where + ") " +
                     describe_status(status, rank.remote) + describe_stopped(),
                 exit_code_of(status), kReportGrace, /*ask_for_dumps=*/true);
      }
    }
  }
  watch_for_stranded_ranks();
}

// A stopped rank's peers name it when their calls time out. Once no rank
// runs to time it out (the others exited, or exited and were stopped), only
// someone sending SIGCONT can end its wait: it gets the ranks' own deadline
// for that. Only local ranks are seen stopped (a remote rank's pid here is
// its ssh client).
void Job::watch_for_stranded_ranks() {
  bool any_stopped = false;
  bool any_exited = false;
  for (const auto& rank : ranks_) {
    if (!rank.running) {
      any_exited = true;
      continue;
    }
    if (rank.stopped_by == 0) {
      stranded_deadline_.reset();
      return;
    }
    any_stopped = true;
  }
  // A job whose every rank was paused (on purpose, say) is left alone.
  if (!any_stopped || !any_exited || stopping_) {
    stranded_deadline_.reset();
  } else if (!stranded_deadline_) {
    stranded_deadline_ = Clock::now() + rank_timeout_;
  }
}

// Ranks stopped by a signal answer nobody: when others time out, these are
// the ones they were waiting for.
std::string Job::describe_stopped() const {
  std::string text;
  for (const auto& rank : ranks_) {
    if (!rank.running || rank.stopped_by == 0) continue;
    text += "; rank " + std::to_string(rank.rank) + " (pid " + std::to_string(rank.pid) + " on " +
            rank.host + ") is stopped by SIG" + sigabbrev_np(rank.stopped_by) +
            " and answers nobody";
  }
  return text;
}

void Job::stop_all(const std::string& why, int exit_code, std::chrono::milliseconds grace,
                   bool ask_for_dumps) {
  if (stopping_) return;
  stopping_ = true;
  stranded_deadline_.reset();
  exit_code_ = exit_code;
  show_start_progress();
  stdin_relay_.close_target();
  int others = 0;
  for (const auto& rank : ranks_) others += rank.running ? 1 : 0;
  // What the others were doing, while they still do it.
  if (ask_for_dumps && others > 0 && record_ && record_->ask_for_dumps()) {
    grace = std::max<std::chrono::milliseconds>(grace, kDumpGrace);
  }
  std::string what = why;
  if (others > 0) {
    what += "; stopping " + std::to_string(others) + " running rank" + (others == 1 ? "" : "s");
    if (grace.count() > 0) what += " (after " + std::to_string(grace.count()) + " ms to report)";
  }
  say(what);
  term_deadline_ = Clock::now() + grace;
  if (grace.count() == 0) terminate_running();
}

void Job::terminate_running() {
  term_deadline_.reset();
  for (const auto& rank : ranks_) {
    if (!rank.running) continue;
    killpg(rank.pid, SIGTERM);
    if (rank.stopped_by != 0)
      killpg(rank.pid, SIGCONT);  // a stopped process acts on SIGTERM only once continued
  }
  kill_deadline_ = Clock::now() + kKillGrace;
}

void Job::check_deadlines() {
  const auto now = Clock::now();
  if (job_deadline_ && now >= *job_deadline_ && !stopping_) {
    std::vector<int> running;
    std::vector<std::string> hosts;
    for (const auto& rank : ranks_) {
      hosts.push_back(rank.host);
      if (rank.running) running.push_back(rank.rank);
    }
    job_deadline_.reset();
    stop_all("--timeout reached; still running: " + describe_ranks(running, hosts), 124,
             std::chrono::milliseconds(0), /*ask_for_dumps=*/true);
  }
  if (status_deadline_ && now >= *status_deadline_) print_status();
  if (stranded_deadline_ && now >= *stranded_deadline_) {
    stranded_deadline_.reset();
    stop_all("every rank still running stayed stopped for RLX_TIMEOUT_S (" +
                 std::to_string(rank_timeout_.count()) + " ms)" + describe_stopped(),
             1);
  }
  if (term_deadline_ && now >= *term_deadline_) terminate_running();
  if (kill_deadline_ && now >= *kill_deadline_) {
    for (const auto& rank : ranks_) {
      if (rank.running) killpg(rank.pid, SIGKILL);
    }
    kill_deadline_.reset();
  }
}

std::optional<Clock::time_point> Job::next_deadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& deadline : {job_deadline_, term_deadline_, kill_deadline_, drain_deadline_,
                               status_deadline_, stranded_deadline_}) {
    if (deadline && (!next || *deadline < *next)) next = deadline;
  }
  return next;
}

bool Job::anything_running() const {
  for (const auto& rank : ranks_) {
    if (rank.running) return true;
  }
  return false;
}

bool Job::output_open() const {
  for (const auto& rank : ranks_) {
    if (rank.fds[0] >= 0 || rank.fds[1] >= 0) return true;
  }
  return false;
}

}  // namespace

int run_job(const Options& options, const std::vector<Placement>& placements) {
  return Job(options, placements).run();
}

void print_dry_run(const Options& options, const std::vector<Placement>& placed) {
  for (int r = 0; r < options.num_ranks; ++r) {
    const Placement& where = placed[static_cast<std::size_t>(r)];
    std::string line = "rank " + std::to_string(r) + " on " + where.host + ":";
    if (!is_local_host(where.host)) {
      for (const auto& word : agent_argv(options, where.host)) {
        line += " " + word;
      }
      line += " <<< (over stdin)";
    }
    if (!where.cpus.empty()) line += " (bound to CPUs " + cpu_list(where.cpus) + ")";
    if (!options.cwd.empty()) line += " cd " + options.cwd + " &&";
    for (const auto& entry : rank_variables(options, r, where, "<secret>", "<rlxrun's address>",
                                            {"<rank 0's address>", "<a free port there>"})) {
      line += " " + entry;
    }
    for (const auto& arg : options.program) line += " " + arg;
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace rlx::launcher
