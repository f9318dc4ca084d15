// One rlxrun job: start the ranks, relay their output, watch them, tear down.
#pragma once

#include "launcher/options.h"

namespace rlx::launcher {

// Runs the job to the end and returns rlxrun's exit status (see --help).
int run_job(const Options& options);

// Prints what run_job would start, without starting anything.
void print_dry_run(const Options& options);

}  // namespace rlx::launcher
