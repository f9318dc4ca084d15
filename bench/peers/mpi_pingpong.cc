// A plain MPI_Send/MPI_Recv ping-pong between ranks 0 and 1, outside the
// sweep driver: what the sweep's send/recv row is checked against
// (docs/BENCHMARKS.md, "The send/recv sweep, one buffer or two").
//   mpirun -n 2 mpi-pingpong BYTES ITERATIONS one|two
// `one` receives into the buffer it sends from, `two` into a second buffer.
// Prints the slowest rank's half round trip, after one untimed round.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <mpi.h>

namespace {

double half_round_trip(int rank, std::vector<char>& outgoing, std::vector<char>& incoming,
                       int iterations) {
  const int bytes = static_cast<int>(outgoing.size());
  const int peer = 1 - rank;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations && rank < 2; ++i) {
    if (rank == 0) MPI_Send(outgoing.data(), bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
    MPI_Recv(incoming.data(), bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 1) MPI_Send(outgoing.data(), bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
  }
  double mine = (MPI_Wtime() - start) / iterations / 2;
  double slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 4 || (std::string(argv[3]) != "one" && std::string(argv[3]) != "two")) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi-pingpong BYTES ITERATIONS one|two\n");
    MPI_Finalize();
    return 2;
  }
  const auto bytes = static_cast<std::size_t>(std::strtoull(argv[1], nullptr, 10));
  const int iterations = std::max(1, std::atoi(argv[2]));
  const bool two = std::string(argv[3]) == "two";
  std::vector<char> first(bytes, 1), second(two ? bytes : 0, 0);
  std::vector<char>& incoming = two ? second : first;
  half_round_trip(rank, first, incoming, iterations);
  const double seconds = half_round_trip(rank, first, incoming, iterations);
  if (rank == 0) std::printf("%zu B, %s buffer(s): %.2f us\n", bytes, argv[3], seconds * 1e6);
  MPI_Finalize();
  return 0;
}
