#include "tests/faults/fault_job.h"

#include <chrono>
#include <cstdlib>

namespace rlx::testing {

const std::string& fault_backend() {
  static const std::string backend = [] {
    const char* name = std::getenv("RLX_FAULTS_BACKEND");
    return std::string(name != nullptr && *name != '\0' ? name : "tcp");
  }();
  return backend;
}

JobOutcome run_fault_mode(const std::string& mode, int ranks, std::vector<std::string> env,
                          std::function<void(const rendezvous::Server&)> hook,
                          std::vector<std::string> wrapper) {
  using namespace std::chrono_literals;
  wrapper.push_back(sibling_program("fault_program"));
  wrapper.push_back(mode);
  env.insert(env.begin(), "RLX_BACKEND=" + fault_backend());
  // The harness passes no RLX_* of its own environment on; RLX_SHM=0 (the
  // cases' TCP run, tests/faults/CMakeLists.txt) is the exception.
  if (const char* shm = std::getenv("RLX_SHM"))
    env.insert(env.begin(), std::string("RLX_SHM=") + shm);
  return run_job({.ranks = ranks,
                  .argv = std::move(wrapper),
                  .env = std::move(env),
                  .limit = fault_backend() == "verbs" ? 90s : 60s,  // TCG in the VM is slow
                  .while_running = std::move(hook)});
}

long long reported_ms(const std::string& out) {
  const auto at = out.find("ms=");
  return at == std::string::npos ? -1 : std::atoll(out.c_str() + at + 3);
}

std::string describe(const JobOutcome& job) {
  std::string text;
  for (std::size_t r = 0; r < job.ranks.size(); ++r) {
    text += "--- rank " + std::to_string(r) + " status " + std::to_string(job.ranks[r].status) +
            "\n" + job.ranks[r].out + job.ranks[r].err;
  }
  return text;
}

int count_of(const std::string& text, const std::string& needle) {
  int count = 0;
  for (std::size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) {
    ++count;
  }
  return count;
}

}  // namespace rlx::testing
