/* What a C program sees when a peer fails mid-job (c_api_faults_test.cc runs
 * it): rank 1 exits without a word ("peer_exits") or stops ("peer_frozen")
 * before an all-reduce; rank 0 reports the call's status, the rank its error
 * blames, and the error, then exits 0. A stopped rank has a helper kill it
 * 5 s later, so no test waits on it to its limit. */
#define _POSIX_C_SOURCE 200809L /* kill, fork */

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "rlx/rlx_c.h"

int main(int argc, char** argv) {
  rlx_group* world = NULL;
  int rank = -1;
  if (argc != 2 || rlx_init("any", 1, &world) != RLX_OK || rlx_rank(world, &rank) != RLX_OK) {
    fprintf(stderr, "usage: c_api_faults peer_exits|peer_frozen (%s)\n", rlx_last_error());
    return 2;
  }
  if (rank == 1 && strcmp(argv[1], "peer_exits") == 0) _exit(0);
  if (rank == 1 && strcmp(argv[1], "peer_frozen") == 0) {
    const pid_t frozen = getpid();
    if (fork() == 0) {
      sleep(5);
      kill(frozen, SIGKILL);
      _exit(0);
    }
    raise(SIGSTOP);
  }
  float values[256] = {0};
  const rlx_status status = rlx_all_reduce(world, values, 256, RLX_F32, RLX_SUM);
  printf("RESULT rank=%d status=%s peer=%d error=%s\n", rank, rlx_status_name(status),
         rlx_last_error_peer(), rlx_last_error());
  fflush(stdout);
  rlx_group_free(world);
  return 0;
}
