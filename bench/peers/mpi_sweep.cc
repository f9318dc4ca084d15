// The sweep over plain Open MPI (MPI_Allreduce, MPI_Allgather, MPI_Barrier,
// MPI_Send/Recv, MPI_Bcast, MPI_Alltoall, MPI_Reduce, MPI_Gather): the
// reference rlx is measured against. Which Open MPI
// path runs is mpirun's choice (--mca btl tcp,self forces TCP).
#include <mpi.h>

#include "bench/sweep_driver.h"

namespace {

class MpiComm {
 public:
  int rank() {
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
  }
  int size() {
    int n = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
  }
  void all_sum(float* data, std::size_t count) {
    MPI_Allreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  void all_gather(const float* in, float* out, std::size_t count) {
    MPI_Allgather(in, static_cast<int>(count), MPI_FLOAT, out, static_cast<int>(count), MPI_FLOAT,
                  MPI_COMM_WORLD);
  }
  void barrier() { MPI_Barrier(MPI_COMM_WORLD); }
  void broadcast(float* data, std::size_t count, int root) {
    MPI_Bcast(data, static_cast<int>(count), MPI_FLOAT, root, MPI_COMM_WORLD);
  }
  void all_to_all(const float* in, float* out, std::size_t count) {
    MPI_Alltoall(in, static_cast<int>(count), MPI_FLOAT, out, static_cast<int>(count), MPI_FLOAT,
                 MPI_COMM_WORLD);
  }
  void reduce(float* data, std::size_t count, int root) {
    // In place at the root, as rlx's reduce; the others' data is only read.
    MPI_Reduce(rank() == root ? MPI_IN_PLACE : data, data, static_cast<int>(count), MPI_FLOAT,
               MPI_SUM, root, MPI_COMM_WORLD);
  }
  void gather(const float* in, float* out, std::size_t count, int root) {
    MPI_Gather(in, static_cast<int>(count), MPI_FLOAT, out, static_cast<int>(count), MPI_FLOAT,
               root, MPI_COMM_WORLD);
  }
  void send(int peer, const std::byte* data, std::size_t bytes) {
    MPI_Send(data, static_cast<int>(bytes), MPI_BYTE, peer, 1, MPI_COMM_WORLD);
  }
  void recv(int peer, std::byte* data, std::size_t bytes) {
    MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  double max(double value) {
    MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return value;
  }
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MpiComm comm;
  rlx::bench::Sweep<MpiComm>(comm, rlx::bench::parse_sweep_options(argc, argv, "openmpi")).run();
  MPI_Finalize();
  return 0;
}
