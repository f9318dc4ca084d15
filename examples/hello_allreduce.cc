// Every rank contributes rank+1 to each element; every rank checks the sum.
// Run alone (a group of one) or under rlxrun / mpirun with any number of ranks.
#include <algorithm>
#include <cstdio>
#include <vector>

#include <rlx/rlx.h>

int main() {
  try {
    auto group = rlx::init();
    const int n = group->world_size();
    std::vector<float> values(1 << 20, static_cast<float>(group->rank() + 1));
    group->all_sum(std::span(values));

    const float expected = static_cast<float>(n) * static_cast<float>(n + 1) / 2.0f;
    const auto wrong =
        std::count_if(values.begin(), values.end(), [&](float v) { return v != expected; });
    std::vector<int> ranks(static_cast<std::size_t>(n));
    const int mine = group->rank();
    group->all_gather(std::span<const int>(&mine, 1), std::span(ranks));
    group->barrier();

    std::printf("rank %d of %d (%.*s): all_sum of %zu floats = %g, %ld wrong; ranks seen: %d..%d\n",
                group->rank(), n, static_cast<int>(group->backend().size()),
                group->backend().data(), values.size(), values[0], static_cast<long>(wrong),
                ranks.front(), ranks.back());
    return wrong == 0 ? 0 : 1;
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
}
