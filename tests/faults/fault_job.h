// The fault cases' common ground: a job of tests/faults/fault_program on the
// backend under test, and how to read what its ranks said. faults_test runs
// every case on TCP; inside the RDMA VM the same binary runs them on verbs
// (RLX_FAULTS_BACKEND=verbs, tests/verbs/vm_suite.sh), so the cases are
// written once for every backend.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/support/job_harness.h"

namespace rlx::testing {

// "tcp" (default) or "verbs": RLX_FAULTS_BACKEND.
const std::string& fault_backend();

// Runs `fault_program MODE` as `ranks` ranks on fault_backend(), with `env`
// added, `hook` called while it runs, and `wrapper` (a command) in front.
JobOutcome run_fault_mode(const std::string& mode, int ranks, std::vector<std::string> env = {},
                          std::function<void(const rendezvous::Server&)> hook = {},
                          std::vector<std::string> wrapper = {});

// Milliseconds from "RESULT ... ms=N", or -1.
long long reported_ms(const std::string& out);

// Every rank's status, stdout and stderr, for failure messages.
std::string describe(const JobOutcome& job);

// How many times `needle` occurs in `text`.
int count_of(const std::string& text, const std::string& needle);

}  // namespace rlx::testing
