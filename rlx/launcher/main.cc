// rlxrun: starts an rlx job. See rlx/launcher/options.cc (usage_text) for the manual.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "rlx/launcher/job.h"
#include "rlx/launcher/options.h"
#include "rlx/launcher/remote_agent.h"
#include "rlx/version.h"

int main(int argc, char** argv) {
  using namespace rlx::launcher;
  if (argc == 2 && std::string(argv[1]) == kRemoteAgentFlag) return run_remote_agent();
  Options options;
  try {
    options = parse_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& error) {
    std::fprintf(stderr, "rlxrun: %s\n", error.what());
    return 2;
  }
  if (options.show_help) {
    std::fputs(usage_text(), stdout);
    return 0;
  }
  if (options.show_version) {
    std::printf("rlxrun (rlx) %s\n", RLX_VERSION_STRING);
    return 0;
  }
  std::vector<rlx::launcher::Placement> placements;
  try {
    placements = plan_placement(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rlxrun: %s\n", error.what());
    return 2;
  }
  if (options.dry_run) {
    print_dry_run(options, placements);
    return 0;
  }
  try {
    return run_job(options, placements);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rlxrun: %s\n", error.what());
    return 1;
  }
}
