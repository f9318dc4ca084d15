// The program shown in README.md (kept identical by tests/readme_example_test.sh).
#include <cstdio>
#include <vector>

#include <rlx/rlx.h>

int main() {
  auto group = rlx::init();  // the launcher's group, or a group of one
  std::vector<float> grad(1024, float(group->rank() + 1));
  group->broadcast(std::span(grad), /*root=*/0);  // every rank starts from rank 0's
  group->all_sum(std::span(grad));                // in place, across every rank

  std::vector<int> ranks(group->world_size());
  const int me = group->rank();
  group->all_gather(std::span<const int>(&me, 1), std::span(ranks));
  group->barrier();

  std::printf("rank %d of %d: grad[0] = %g\n", me, group->world_size(), grad[0]);
  group->send_bytes((me + 1) % group->world_size(), /*tag=*/7, std::as_bytes(std::span(grad)));
  auto from_left = group->recv_bytes((me + group->world_size() - 1) % group->world_size(), 7);
  return from_left.size() == grad.size() * sizeof(float) ? 0 : 1;
}
