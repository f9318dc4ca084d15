#include "rlx/launcher/options.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include <boost/program_options.hpp>

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

// --bind-to's value, or RLX_BIND_TO's (`flag` says which).
BindTo parse_bind_to(std::string_view text, std::string_view flag = "--bind-to") {
  if (text == "socket") return BindTo::package;  // Open MPI 4's name for it
  for (BindTo policy : {BindTo::core, BindTo::hwthread, BindTo::package, BindTo::none}) {
    if (text == name_of(policy)) return policy;
  }
  throw UsageError(std::string(flag) + " '" + std::string(text) +
                   "': expected core, hwthread, package (or socket) or none");
}

MapBy parse_map_by(std::string_view text) {
  for (MapBy policy : {MapBy::slot, MapBy::node}) {
    if (text == name_of(policy)) return policy;
  }
  throw UsageError("--map-by '" + std::string(text) + "': expected slot or node");
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

// The key of the program's words. No flag can spell it: the parser ends a
// flag's name at '=', so "--program=" is the unknown option "--program".
constexpr const char* kProgram = "program=";

// rlxrun's vocabulary for Boost.Program_options. Values are checked after
// parsing (parse_rank_count, ...) so that every error names the flag as typed.
const boost::program_options::options_description& vocabulary() {
  namespace po = boost::program_options;
  static const po::options_description kVocabulary = [] {
    po::options_description flags;
    auto text = [] { return po::value<std::string>(); };
    auto texts = [] { return po::value<std::vector<std::string>>()->composing(); };
    flags.add_options()           // as mpirun and torchrun users spell them
        ("help,h", "")            // switches: zero tokens, so "--help=me" is an error
        ("version", "")           //
        ("dry-run", "")           //
        ("tag-output", "")        //
        ("no-tag-output", "")     //
        ("timestamp-output", "")  //
        ("oversubscribe", "")     //
        (",n", text())            // -n 4, -n4
        ("np", text())            // -np 4, --np 4, --np=4
        ("backend", text())       //
        ("ifname", text())        //
        ("timeout", text())       //
        ("env", texts())          //
        (",x", texts())           //
        ("cwd", text())           //
        ("output-dir", text())    //
        ("hostfile", text())      //
        ("host,H", text())        //
        ("rsh", text())           //
        ("bind-to", text())       //
        ("map-by", text())        //
        (kProgram, texts()->multitoken());
    return flags;
  }();
  return kVocabulary;
}

// Everything from the first word that is not an option on is the program and
// its arguments, options or not ("rlxrun -n 2 ./prog -n 7"). A last word
// alone is left to the positional rule, which makes it the program too:
// Boost also asks this parser about a flag's value ("--hostfile hostfile"),
// one word at a time, and a value must not read as the program.
std::vector<boost::program_options::option> program_and_rest(std::vector<std::string>& words) {
  if (words.size() < 2 || words.front().starts_with("-")) return {};
  boost::program_options::option program(kProgram, words);
  program.original_tokens = words;
  words.clear();
  return {program};
}

// A flag's name as the user types it: Boost names the short-only -n "--n".
std::string flag_name(const boost::program_options::error_with_option_name& error) {
  std::string name = error.get_option_name();
  if (name.size() == 3 && name.starts_with("--")) name.erase(0, 1);
  return name;
}

// The vocabulary's entry for a flag as typed ("--np", "-n", "-np=4"), if any.
const boost::program_options::option_description* flag_spelled(std::string_view word) {
  if (!word.starts_with('-') || word.starts_with("---")) return nullptr;
  word = word.substr(0, word.find('='));
  const std::string name(word.substr(word.starts_with("--") ? 2 : 1));
  if (name.empty()) return nullptr;
  if (const auto* long_form = vocabulary().find_nothrow(name, false)) return long_form;
  return word.size() == 2 ? vocabulary().find_nothrow(std::string(word), false) : nullptr;
}

// Boost's errors in rlxrun's words, naming the flag as the user typed it.
[[noreturn]] void rethrow_as_usage(const boost::program_options::error& error) {
  namespace po = boost::program_options;
  if (const auto* unknown = dynamic_cast<const po::unknown_option*>(&error)) {
    throw UsageError("unknown option '" + unknown->get_option_name() +
                     "' (rlxrun --help lists the options)");
  }
  if (const auto* syntax = dynamic_cast<const po::invalid_command_line_syntax*>(&error)) {
    if (syntax->kind() == po::invalid_command_line_syntax::extra_parameter) {
      throw UsageError(flag_name(*syntax) + " takes no value");
    }
    if (syntax->kind() == po::invalid_command_line_syntax::missing_parameter) {
      throw UsageError(flag_name(*syntax) + " needs a value");
    }
    if (syntax->kind() == po::invalid_command_line_syntax::empty_adjacent_parameter) {
      const auto* flag = flag_spelled(flag_name(*syntax));
      if (flag == nullptr || flag->long_name() == kProgram) {
        throw UsageError("unknown option '" + flag_name(*syntax) +
                         "' (rlxrun --help lists the options)");
      }
      throw UsageError(flag_name(*syntax) + (flag->semantic()->max_tokens() == 0
                                                 ? " takes no value"
                                                 : " needs a value after '='"));
    }
  }
  throw UsageError(std::string(error.what()) + " (rlxrun --help lists the options)");
}

boost::program_options::parsed_options tokenize(const std::vector<std::string>& args) {
  namespace po = boost::program_options;
  namespace style = po::command_line_style;
  po::positional_options_description after_double_dash;  // "rlxrun -n 2 -- --weird-program"
  after_double_dash.add(kProgram, -1);
  try {
    return po::command_line_parser(args)
        .options(vocabulary())
        .style(style::allow_short | style::allow_long | style::allow_dash_for_short |
               style::short_allow_adjacent | style::short_allow_next | style::long_allow_adjacent |
               style::long_allow_next | style::allow_long_disguise)
        .extra_style_parser(program_and_rest)
        .positional(after_double_dash)
        .run();
  } catch (const po::error& error) {
    rethrow_as_usage(error);
  }
}

// Applies one option, in command-line order (so --env and -x keep theirs).
// A flag's value as given: Boost reads "-x=A=1" as -x with the value "=A=1"
// (the long forms take '=' already). Another flag is no value: in
// "--output-dir --dry-run ./prog" the directory is missing.
std::string value_of(const boost::program_options::option& option) {
  if (option.value.empty()) return {};
  std::string value = option.value.front();
  const std::string& typed = option.original_tokens.front();
  if (typed.size() > 2 && typed[1] != '-' && typed[2] == '=' && value.starts_with('=')) {
    value.erase(0, 1);
  }
  if (option.original_tokens.size() > 1 && flag_spelled(value) != nullptr) {
    throw UsageError(typed + " needs a value, not the option " + value);
  }
  return value;
}

void apply(const boost::program_options::option& option, Options& options) {
  const std::string& key = option.string_key;
  if (key != kProgram && option.original_tokens.front().starts_with("---")) {
    throw UsageError("unknown option '" + option.original_tokens.front() +
                     "' (rlxrun --help lists the options)");
  }
  const std::string value = key == kProgram ? std::string() : value_of(option);
  if (key == "help") {
    options.show_help = true;
  } else if (key == "version") {
    options.show_version = true;
  } else if (key == "dry-run") {
    options.dry_run = true;
  } else if (key == "tag-output" || key == "no-tag-output") {
    options.tag_output = key == "tag-output";
  } else if (key == "timestamp-output") {
    options.timestamp_output = true;
  } else if (key == "oversubscribe") {
    options.oversubscribe = true;
  } else if (key == "-n" || key == "np") {
    if (key == "-n" && value.starts_with('p')) {  // "-np4" or "-npernode": -n with "p4"
      throw UsageError("unknown option '-n" + value + "' (ranks: -np 4, --np=4 or -n4)");
    }
    options.num_ranks = parse_rank_count(value);
  } else if (key == "backend") {
    options.backend = value;
    if (value != "tcp" && value != "verbs" && value != "any") {
      throw UsageError("--backend '" + value + "': expected tcp, verbs or any");
    }
  } else if (key == "ifname") {
    options.ifname = value;
  } else if (key == "timeout") {
    options.job_timeout = parse_seconds("--timeout", value);
  } else if (key == "env" || key == "-x") {
    const bool pass_on = key == "-x";
    options.env.push_back(parse_env_assignment(pass_on ? "-x" : "--env", value, pass_on));
  } else if (key == "cwd") {
    options.cwd = value;
  } else if (key == "output-dir") {
    options.output_dir = value;
  } else if (key == "hostfile") {
    options.hostfile = value;
  } else if (key == "host") {
    options.host_list = value;
  } else if (key == "rsh") {
    options.rsh = split_command_words(value, "--rsh");
  } else if (key == "bind-to") {
    options.bind_to = parse_bind_to(value);
  } else if (key == "map-by") {
    options.map_by = parse_map_by(value);
  } else if (key == kProgram) {
    options.program.insert(options.program.end(), option.value.begin(), option.value.end());
  }
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
  Options options;
  if (const char* bind_to = std::getenv("RLX_BIND_TO"); bind_to != nullptr && *bind_to != '\0') {
    options.bind_to = parse_bind_to(bind_to, "RLX_BIND_TO");
  }
  for (const auto& option : tokenize(args).options) apply(option, options);
  // A lone "-" names no program, unless after "--".
  const std::size_t program_at = args.size() - options.program.size();
  if (!options.program.empty() && options.program.front() == "-" &&
      (program_at == 0 || args[program_at - 1] != "--")) {
    throw UsageError("unknown option '-' (rlxrun --help lists the options)");
  }
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
    them (SIGTERM, SIGKILL 5 s later) and exits with that rank's status. A
    rank left stopped by a signal after all others exited gets RLX_TIMEOUT_S
    to be continued (local ranks); then rlxrun stops it and exits 1.
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
    --map-by slot|node   slot: fill each host's slots before the next host's (default);
                         node: deal ranks round-robin over the hosts
    --bind-to core|hwthread|package|none
                         what each rank may run on: one core (all its hardware
                         threads), one hardware thread, one package (socket), or
                         anything. Default, as mpirun: a core each for up to 2 ranks
                         on a host, a package each for more on hosts with several,
                         none where ranks outnumber the cores rlxrun may use (its
                         affinity: taskset, cgroups, Slurm). RLX_BIND_TO in
                         rlxrun's environment sets the default. Remote ranks bind
                         by their own host's cores
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

FLIGHT RECORD AND TRACES
    When a rank fails or --timeout ends the job, rlxrun asks the running
    ranks for their flight record and prints the culprit ("rank 2 never
    entered ..."). kill -USR1 <rlxrun's pid> prints what every local rank is
    doing now, and the job goes on. With RLX_TRACE=DIR (--env or rlxrun's
    environment) every rank writes its calls as a Chrome trace, and rlxrun
    merges them into DIR/trace.json at the end (docs/RELIABILITY.md).

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
