// Joining a job whose launcher runs a PMIx server (Slurm's srun --mpi=pmix,
// Open MPI's mpirun, PRRTE): the rank, the size and the local ranks come
// from the server, and every rank's endpoint is exchanged through its
// key-value store (put, commit, fence with data collection, get). Uses the
// PMIx library (libpmix); pmix_client_none.cc stands in when rlx is built
// without it (RLX_WITH_PMIX=OFF, or AUTO without libpmix-dev).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::pmix {

// True when this build links libpmix.
bool is_built();

struct Membership {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
};

// This process's connection to its PMIx server: PMIx_Init on creation,
// PMIx_Finalize when the last user lets it go.
class Client {
 public:
  // Connects to the server named by the environment (PMIX_SERVER_URI, ...).
  // Throws CollectiveError (backend_unavailable) when the server cannot be
  // reached or PMIx is not built, naming what to check.
  static std::shared_ptr<Client> connect();
  virtual ~Client() = default;

  virtual Membership membership() const = 0;
  // The host `rank` runs on, as the server names it (PMIX_HOSTNAME).
  virtual std::string host_of(int rank) = 0;
  // Every rank's `mine` under `key`, in rank order: a collective call of
  // every rank of the job, ending in a CollectiveError (timeout) when some
  // rank has not called it within `timeout`.
  virtual std::vector<std::string> all_gather(std::string_view key, const std::string& mine,
                                              std::chrono::milliseconds timeout) = 0;
};

}  // namespace rlx::pmix
