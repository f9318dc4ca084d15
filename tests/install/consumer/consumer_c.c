/* A C program against the installed C API. */
#include <rlx/rlx_c.h>
#include <stdio.h>

int main(void) {
  rlx_group* world = NULL;
  int rank = -1, size = -1;
  float values[3] = {1, 2, 3};
  if (rlx_init("any", 0, &world) != RLX_OK || rlx_rank(world, &rank) != RLX_OK ||
      rlx_size(world, &size) != RLX_OK ||
      rlx_all_reduce(world, values, 3, RLX_F32, RLX_SUM) != RLX_OK) {
    fprintf(stderr, "consumer_c: %s\n", rlx_last_error());
    return 1;
  }
  printf("consumer_c: rlx %s, rank %d of %d, sum %g\n", rlx_version(), rank, size,
         (double)(values[0] + values[1] + values[2]));
  rlx_group_free(world);
  return rlx_finalize() == RLX_OK && values[2] == 3.0f ? 0 : 1;
}
