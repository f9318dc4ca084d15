// OpenBLAS's threads for ranks that share a host.
#pragma once

#include <string>

namespace rlx {

// Gives OpenBLAS this process's share of the host's CPUs when `ranks_here`
// ranks share them (the CPUs it is bound to when a launcher bound it), as
// torchrun sets one thread per process and mpirun binds ranks to cores:
// without it every rank starts a thread per core and a small matmul waits
// on oversubscribed threads. It only ever lowers the count (fewer may be
// the program's own openblas_set_num_threads), and OPENBLAS_NUM_THREADS,
// GOTO_NUM_THREADS or OMP_NUM_THREADS, when set, win. Returns what it did,
// for the debug log.
std::string fit_blas_threads(int ranks_here);

}  // namespace rlx
