// Runs an rlx job from inside a test: a rendezvous server in the test
// process and N real rank processes, without rlxrun's teardown, so a test can
// watch what the surviving ranks do when one fails.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "rlx/transport/rendezvous/server.h"

namespace rlx::testing {

struct RankOutcome {
  int status = -1;  // as from waitpid
  std::string out;
  std::string err;

  bool exited_ok() const;
  bool killed_by(int signal) const;
};

struct JobOutcome {
  std::vector<RankOutcome> ranks;
  std::chrono::milliseconds elapsed{0};
};

struct JobSpec {
  int ranks = 2;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // extra "NAME=VALUE"
  std::chrono::seconds limit{60};
  // false: no rendezvous (the ranks use RLX_HOSTFILE from `env`).
  bool use_coordinator = true;
  // Called once every rank has registered, while the job runs.
  std::function<void(const rendezvous::Server&)> while_running;
};

// Runs the job to completion (killing it at the limit). Never hangs.
JobOutcome run_job(const JobSpec& spec);

// The path of a helper program built next to the test binary.
std::string sibling_program(const std::string& name);

}  // namespace rlx::testing
