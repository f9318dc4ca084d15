// One rlxrun job: start the ranks, relay their output, watch them, tear down.
#pragma once

#include <vector>

#include "rlx/launcher/hostfile.h"
#include "rlx/launcher/options.h"

namespace rlx::launcher {

// Where each rank runs: the host list's slots (--hostfile, -H, a Slurm
// allocation), or every rank on this machine. Without -n (num_ranks 0), sets
// num_ranks to the list's slots. Throws HostfileError, or std::runtime_error
// for a host rlxrun cannot start ranks on.
std::vector<Placement> plan_placement(Options& options);

// Runs the job to the end and returns rlxrun's exit status (see --help).
int run_job(const Options& options, const std::vector<Placement>& placements);

// Prints what run_job would start, without starting anything.
void print_dry_run(const Options& options, const std::vector<Placement>& placements);

}  // namespace rlx::launcher
