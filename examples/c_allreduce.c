/* The README's C example: rlx from a C program. */
#include <rlx/rlx_c.h>
#include <stdio.h>

int main(void) {
  rlx_group* world = NULL;
  if (rlx_init("any", 0, &world) != RLX_OK) {  // the launcher's group, or a group of one
    fprintf(stderr, "%s\n", rlx_last_error());
    return 1;
  }
  int rank = 0, size = 0;
  rlx_rank(world, &rank);
  rlx_size(world, &size);

  float grad[4] = {1, 2, 3, (float)rank};
  rlx_request* pending = NULL;
  rlx_status status = rlx_iall_reduce(world, grad, 4, RLX_F32, RLX_SUM, &pending);
  if (status == RLX_OK) status = rlx_wait(&pending, NULL);  // overlap work before this
  if (status != RLX_OK) {  // RLX_ERR_TIMEOUT, RLX_ERR_PEER_LOST, ...
    fprintf(stderr, "%s: %s\n", rlx_status_name(status), rlx_last_error());
    return 1;
  }
  printf("rank %d of %d: grad = %g %g %g %g\n", rank, size, grad[0], grad[1], grad[2], grad[3]);
  rlx_group_free(world);
  return rlx_finalize() == RLX_OK ? 0 : 1;
}
