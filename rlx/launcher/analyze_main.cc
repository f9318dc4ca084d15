// rlx-analyze DIR: names the culprit of a failed or stuck job from the
// flight-record dumps its ranks wrote into DIR (RLX_DUMP_DIR), as rlxrun
// does after a failed job (docs/RELIABILITY.md).
#include <cstdio>
#include <string>
#include <vector>

#include "rlx/launcher/record_analysis.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]).starts_with("-")) {
    std::fprintf(stderr,
                 "usage: rlx-analyze DIR\n"
                 "  Reads the rank-R.json dumps in DIR (RLX_DUMP_DIR) and names the rank and\n"
                 "  call that held the job up.\n");
    return 2;
  }
  std::vector<std::string> problems;
  const auto records = rlx::launcher::read_records(argv[1], problems);
  for (const auto& problem : problems) std::fprintf(stderr, "rlx-analyze: %s\n", problem.c_str());
  if (records.empty()) {
    std::fprintf(stderr, "rlx-analyze: no dump in %s\n", argv[1]);
    return 1;
  }
  const auto findings = rlx::launcher::find_culprits(records, 0);
  if (findings.empty()) {
    std::printf("%zu dumps: every rank finished its last call\n", records.size());
  }
  for (const auto& line : findings) std::printf("%s\n", line.c_str());
  return 0;
}
