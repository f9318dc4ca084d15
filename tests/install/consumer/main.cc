#include <cstdio>

#include <rlx/rlx.h>

int main() {
  auto group = rlx::init();
  int values[] = {1, 2, 3};
  group->all_sum(std::span(values));
  std::printf("consumer: rlx %s, rank %d of %d, sum %d\n", RLX_VERSION_STRING, group->rank(),
              group->world_size(), values[0] + values[1] + values[2]);
  return values[2] == 3 ? 0 : 1;
}
