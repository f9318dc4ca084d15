// rlxrun's command line.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rlx/launcher/binding.h"

namespace rlx::launcher {

// A bad command line; what() says what was wrong and what was expected.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The most ranks one job may have.
inline constexpr int kMaxRanks = 4096;

struct Options {
  int num_ranks = 0;    // 0: every slot of the host list (plan_placement fills it in)
  std::string backend;  // --backend; empty: RLX_BACKEND from rlxrun's environment, else tcp
  std::string ifname;
  std::optional<std::chrono::milliseconds> job_timeout;  // --timeout: the whole job
  std::vector<std::pair<std::string, std::string>> env;  // --env K=V, in order
  std::string cwd;
  bool tag_output = true;
  bool timestamp_output = false;  // --timestamp-output: the time before each line
  std::string output_dir;
  std::string hostfile;   // --hostfile
  std::string host_list;  // -H h1:2,h2
  bool oversubscribe = false;
  BindTo bind_to = BindTo::automatic;  // --bind-to
  MapBy map_by = MapBy::slot;          // --map-by
  std::vector<std::string> rsh;        // --rsh, split into words; empty: kDefaultRsh
  bool dry_run = false;
  bool show_help = false;
  bool show_version = false;
  std::vector<std::string> program;  // the program and its arguments
};

// Parses argv[1..]. Throws UsageError.
Options parse_options(const std::vector<std::string>& args);

// The --help text.
const char* usage_text();

}  // namespace rlx::launcher
