#include <cstdio>

#include <rlx/rlx.h>
#include <rlx/transport/rendezvous/pmix_client.h>

int main() {
  auto group = rlx::init();
  int values[] = {1, 2, 3};
  group->all_sum(std::span(values));
  std::printf("consumer: rlx %s, rank %d of %d, sum %d\n", RLX_VERSION_STRING, group->rank(),
              group->world_size(), values[0] + values[1] + values[2]);
  // Which optional parts find_package(rlx) linked: the real ones or their stubs.
  std::printf("consumer: linked mpi %d verbs %d pmix %d\n", rlx::is_mpi_built(),
              rlx::is_verbs_built(), rlx::pmix::is_built());
  return values[2] == 3 ? 0 : 1;
}
