#include "rlx/launcher/options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "rlx/launcher/remote_launch.h"
#include "rlx/transport/launch_env.h"

namespace rlx::launcher {
namespace {

int parse_rank_count(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > kMaxRanks) {
    throw UsageError("-n '" + std::string(text) + "': expected a whole number of ranks, 1 to " +
                     std::to_string(kMaxRanks));
  }
  return value;
}

std::chrono::milliseconds parse_seconds(std::string_view flag, std::string_view text) {
  double seconds = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(seconds) ||
      seconds <= 0) {
    throw UsageError(std::string(flag) + " '" + std::string(text) +
                     "': expected a number of seconds above 0");
  }
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000)));
}

// NAME=VALUE; with `pass_on` (mpirun's -x) also a bare NAME, whose value is
// rlxrun's own.
std::pair<std::string, std::string> parse_env_assignment(std::string_view flag,
                                                         std::string_view text, bool pass_on) {
  auto eq = text.find('=');
  std::string own;
  if (eq == std::string_view::npos && pass_on && !text.empty()) {
    const char* value = std::getenv(std::string(text).c_str());
    if (value == nullptr) {
      throw UsageError(std::string(flag) + " " + std::string(text) + ": " + std::string(text) +
                       " is not set in rlxrun's environment (give " + std::string(text) +
                       "=VALUE)");
    }
    own = std::string(text) + "=" + value;
    text = own;
    eq = text.find('=');
  }
  if (eq == 0 || eq == std::string_view::npos) {
    throw UsageError(std::string(flag) + " '" + std::string(text) + "': expected NAME=VALUE" +
                     (pass_on ? " or the NAME of a variable of rlxrun's environment" : ""));
  }
  const std::string name(text.substr(0, eq));
  if (launch_env::is_per_rank_variable(name)) {
    throw UsageError(std::string(flag) + " '" + std::string(text) + "': " + name +
                     " is set by rlxrun for each rank; " + std::string(flag) +
                     " sets every rank alike");
  }
  return {name, std::string(text.substr(eq + 1))};
}

// Walks the arguments; flags take their value as the next argument or after '='.
class ArgReader {
 public:
  explicit ArgReader(const std::vector<std::string>& args) : args_(args) {}

  bool done() const { return index_ >= args_.size(); }
  std::string_view peek() const { return args_[index_]; }
  std::vector<std::string> rest() { return {args_.begin() + index_, args_.end()}; }

  // Consumes the switch `flag`, which takes no value ("--tag-output=no" is an
  // error, not a switch turned on); false when the next argument is another.
  bool take_switch(std::string_view flag) {
    const std::string_view arg = peek();
    if (arg.size() > flag.size() && arg.starts_with(flag) && arg[flag.size()] == '=') {
      throw UsageError(std::string(flag) + " takes no value: '" + std::string(arg) + "'");
    }
    if (arg != flag) return false;
    ++index_;
    return true;
  }

  // Consumes `flag` (as "flag" or "flag=value", and a one-letter "-n" also as
  // "-n4"); returns false when the next argument is another.
  bool take_flag(std::string_view flag) {
    const std::string_view arg = peek();
    if (arg == flag) {
      ++index_;
      inline_value_.reset();
      return true;
    }
    if (arg.size() > flag.size() && arg.starts_with(flag) && arg[flag.size()] == '=') {
      inline_value_ = std::string(arg.substr(flag.size() + 1));
      ++index_;
      return true;
    }
    if (flag.size() == 2 && arg.size() > 2 && arg.starts_with(flag) &&
        std::isdigit(static_cast<unsigned char>(arg[2]))) {
      inline_value_ = std::string(arg.substr(2));
      ++index_;
      return true;
    }
    return false;
  }

  std::string value_of(std::string_view flag) {
    if (inline_value_) return *std::exchange(inline_value_, std::nullopt);
    if (done()) throw UsageError(std::string(flag) + " needs a value");
    return args_[index_++];
  }

 private:
  const std::vector<std::string>& args_;
  std::size_t index_ = 0;
  std::optional<std::string> inline_value_;
};

bool take_switch(ArgReader& reader, Options& options) {
  if (reader.take_switch("--help") || reader.take_switch("-h")) {
    options.show_help = true;
  } else if (reader.take_switch("--version")) {
    options.show_version = true;
  } else if (reader.take_switch("--dry-run")) {
    options.dry_run = true;
  } else if (reader.take_switch("--tag-output")) {
    options.tag_output = true;
  } else if (reader.take_switch("--no-tag-output")) {
    options.tag_output = false;
  } else if (reader.take_switch("--timestamp-output")) {
    options.timestamp_output = true;
  } else if (reader.take_switch("--oversubscribe")) {
    options.oversubscribe = true;
  } else {
    return false;
  }
  return true;
}

bool take_valued(ArgReader& reader, Options& options) {
  if (reader.take_flag("-np") || reader.take_flag("--np") || reader.take_flag("-n")) {
    options.num_ranks = parse_rank_count(reader.value_of("-n"));
  } else if (reader.take_flag("--backend")) {
    options.backend = reader.value_of("--backend");
    if (options.backend != "tcp" && options.backend != "verbs" && options.backend != "any") {
      throw UsageError("--backend '" + options.backend + "': expected tcp, verbs or any");
    }
  } else if (reader.take_flag("--ifname")) {
    options.ifname = reader.value_of("--ifname");
  } else if (reader.take_flag("--timeout")) {
    options.job_timeout = parse_seconds("--timeout", reader.value_of("--timeout"));
  } else if (reader.take_flag("--env")) {
    options.env.push_back(parse_env_assignment("--env", reader.value_of("--env"), false));
  } else if (reader.take_flag("-x")) {
    options.env.push_back(parse_env_assignment("-x", reader.value_of("-x"), true));
  } else if (reader.take_flag("--cwd")) {
    options.cwd = reader.value_of("--cwd");
  } else if (reader.take_flag("--output-dir")) {
    options.output_dir = reader.value_of("--output-dir");
  } else if (reader.take_flag("--hostfile")) {
    options.hostfile = reader.value_of("--hostfile");
  } else if (reader.take_flag("-H") || reader.take_flag("--host")) {
    options.host_list = reader.value_of("-H");
  } else if (reader.take_flag("--rsh")) {
    options.rsh = split_command_words(reader.value_of("--rsh"), "--rsh");
  } else {
    return false;
  }
  return true;
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
  Options options;
  ArgReader reader(args);
  while (!reader.done()) {
    if (reader.peek() == "--") {
      reader.take_flag("--");
      break;
    }
    if (!reader.peek().starts_with("-")) break;
    if (take_switch(reader, options) || take_valued(reader, options)) continue;
    throw UsageError("unknown option '" + std::string(reader.peek()) +
                     "' (rlxrun --help lists the options)");
  }
  options.program = reader.rest();
  if (options.show_help || options.show_version) return options;
  if (options.num_ranks == 0 && options.hostfile.empty() && options.host_list.empty() &&
      std::getenv("SLURM_JOB_NODELIST") == nullptr) {
    throw UsageError(
        "-n N is required: how many ranks to start (with --hostfile, -H or in a "
        "Slurm allocation, the slots are the default)");
  }
  if (options.program.empty()) throw UsageError("no program given: rlxrun -n N PROGRAM [ARGS...]");
  if (!options.hostfile.empty() && !options.host_list.empty()) {
    throw UsageError("give either --hostfile or -H, not both");
  }
  return options;
}

const char* usage_text() {
  return R"(NAME
    rlxrun - start an rlx job of N ranks

SYNOPSIS
    rlxrun [-n N] [--hostfile FILE | -H host[:slots],...] [OPTIONS] [--] PROGRAM [ARGS...]

DESCRIPTION
    Starts N copies of PROGRAM, on this machine or on the hosts of a hostfile
    (over ssh), each with the environment that
    rlx::init reads to join the group (RLX_RANK, RLX_WORLD_SIZE, RLX_LOCAL_RANK,
    RLX_LOCAL_SIZE, RLX_BACKEND, RLX_JOB_TOKEN, RLX_COORDINATOR), torchrun's
    (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT:
    rank 0's address and a free port there) for other frameworks, plus the
    RLX_* settings of rlxrun's own environment (RLX_TIMEOUT_S, ...; --env
    wins). Each rank's output is prefixed with its rank. If any rank exits
    with a non-zero status or dies by a signal, rlxrun names it (and any rank
    stopped by a signal), gives the others 1 s to report and exit, then stops
    them (SIGTERM, SIGKILL 5 s later) and exits with that rank's status.
    Ctrl-C or SIGTERM to rlxrun stops the whole job at once; if rlxrun itself
    is killed, its ranks are killed with it, on every host.

    While the ranks start, rlxrun shows how many have joined the job's
    rendezvous (on a terminal, one updating line; otherwise a line per change,
    once the start takes longer than a second), and names the ranks still
    missing when RLX_CONNECT_TIMEOUT_S (default 60) has passed.

OPTIONS
    -n, -np, --np N      number of ranks (also -n4); required unless --hostfile, -H
                         or a Slurm allocation gives slots: then all of them
    --backend B          tcp (default), verbs or any: sets RLX_BACKEND
    --hostfile FILE      hosts and slots: Open MPI's format (host slots=N max_slots=M)
                         or MLX's JSON host list (mlx.launch's object form too: its
                         "ips" and "envs" apply); see hostfiles/ for examples
    -H, --host LIST      hosts and slots on the command line: node1:2,node2:4
    --oversubscribe      allow more ranks than slots (never more than max_slots)
    --rsh CMD            how to reach other hosts (default: ssh -o BatchMode=yes; srun
                         inside a Slurm allocation), for example
                         --rsh 'ssh -p 2222 -i ~/.ssh/cluster'
    --ifname IF          network interface the ranks listen on: sets RLX_IFNAME
    --timeout S          end the job after S seconds, naming the ranks still running
    --env K=V            set K=V in every rank's environment (repeatable)
    -x K=V, -x K         the same; -x K passes rlxrun's own K on (as mpirun's -x)
    --cwd DIR            working directory of the ranks
    --tag-output         prefix each output line with [rank] (default)
    --no-tag-output      pass output through untouched
    --timestamp-output   prefix each output line with the local time, to the millisecond
    --output-dir DIR     also write rank N's output to DIR/rank.N.out and DIR/rank.N.err
    --dry-run            print what would be started, start nothing
    -h, --help           this text
    --version            rlxrun's version

    stdin goes to rank 0; the other ranks read /dev/null.

    Without --hostfile or -H every rank runs on this machine, or, inside a
    Slurm allocation (salloc, sbatch), on the allocation's hosts and slots
    (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE), reached with srun. Ranks fill each
    host's slots in order. Hosts that are this machine (localhost, its name,
    its addresses) are started directly. On every other host, rlxrun runs
    `CMD HOST exec RLXRUN --remote-agent`, where RLXRUN is this rlxrun's own
    path (install rlx at the same path on every host, as Open MPI's orted);
    the agent reads the rank's environment, job token included, from ssh's
    stdin (never from a command line), starts the rank in the same working
    directory as rlxrun's (or --cwd), and stops it when the ssh session ends.
    Remote ranks get the RLX_* and --env variables, not rlxrun's whole
    environment. The rendezvous then listens on the address that routes to
    the first remote host (or --ifname's), so every host must reach it.

EXIT STATUS
    0 when every rank exits 0; otherwise the status of the first rank that
    failed (128+N for a rank killed by signal N), 124 when --timeout ended the
    job, 2 for anything the command line, the hostfile or the RLX_* settings
    get wrong (found before any rank starts), 127 when PROGRAM cannot start.

EXAMPLES
    rlxrun -n 4 ./build/release/examples/hello_allreduce
    rlxrun -n 2 --timeout 60 --env RLX_TIMEOUT_S=10 ./my_program --steps 100
)";
}

}  // namespace rlx::launcher
