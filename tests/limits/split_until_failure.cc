// Splits its group again and again, keeping every group (and so its
// connections) open, until a split fails; prints how that failure reads.
//
//   split_until_failure [MAX_GROUPS [COLORS]]     (defaults 10000, 1)
//
// Each split groups the ranks by rank % COLORS.
// Prints "RESULT kind=<error kind> groups=<groups made>" and "MESSAGE
// <what()>", and exits 0 when a split failed with a CollectiveError, 1 when
// MAX_GROUPS were made without one. Anything else (an exception of another
// type, a crash) is the test's failure.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "rlx/rlx.h"

int main(int argc, char** argv) {
  const long max_groups = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 10000;
  const int colors = argc > 2 ? std::atoi(argv[2]) : 1;
  auto group = rlx::init();
  std::vector<std::shared_ptr<rlx::Transport>> groups;
  try {
    while (static_cast<long>(groups.size()) < max_groups) {
      groups.push_back(group->split(group->rank() % colors, group->rank()));
      groups.back()->barrier();  // the new group works, not only exists
    }
  } catch (const rlx::CollectiveError& error) {
    std::printf("RESULT kind=%s groups=%zu\nMESSAGE %s\n",
                std::string(name_of(error.kind())).c_str(), groups.size(), error.what());
    return 0;
  }
  std::printf("RESULT kind=none groups=%zu\n", groups.size());
  return 1;
}
