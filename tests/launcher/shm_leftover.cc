// A rank that creates its shared-memory segment, as the same-host path does,
// and dies before unlinking it: what rlxrun must clean up. Writes the
// segment's path to $PIDS/shm.$RLX_RANK, waits (up to 10 s) until every rank
// has, so rlxrun's teardown stops no rank before its segment exists, then
// exits 5 without destructors.
#include <cstdlib>
#include <fstream>
#include <string>

#include <unistd.h>

#include "rlx/transport/shm/segment.h"

int main() {
  const char* token = std::getenv("RLX_JOB_TOKEN");
  const char* rank = std::getenv("RLX_RANK");
  const char* pids = std::getenv("PIDS");
  const char* world = std::getenv("RLX_WORLD_SIZE");
  if (token == nullptr || rank == nullptr || pids == nullptr || world == nullptr) return 2;
  const std::string name =
      rlx::shm::SharedSegment::name_for(token, 0, std::atoi(rank), rlx::shm::SegmentOwner::self());
  auto* segment = new rlx::shm::SharedSegment(
      rlx::shm::SharedSegment::create(rlx::shm::kDefaultDirectory, name, 4096, {}));
  std::ofstream(std::string(pids) + "/shm." + rank) << segment->path() << "\n";
  const int ranks = std::atoi(world);
  for (int waited_ms = 0; waited_ms < 10'000; waited_ms += 10) {
    int written = 0;
    for (int r = 0; r < ranks; ++r) {
      written += std::ifstream(std::string(pids) + "/shm." + std::to_string(r)).good() ? 1 : 0;
    }
    if (written == ranks) break;
    ::usleep(10'000);
  }
  ::_exit(5);
}
