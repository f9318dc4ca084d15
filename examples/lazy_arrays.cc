// The lazy-array example shown in README.md (kept identical by tests/readme_example_test.sh).
#include <cstdio>

#include <rlx/rlx.h>

int main() {
  rlx::Array x = rlx::random_normal({64, 128}, 0.0, 1.0, /*seed=*/7);
  rlx::Array w = rlx::random_normal({128, 10}, 0.0, 0.1, /*seed=*/8);
  rlx::Array y = rlx::gelu(rlx::matmul(x, w) + 0.5);  // builds a graph: nothing runs yet
  rlx::Array loss = rlx::mean(y * y);
  rlx::async_eval(loss).wait();  // computed once, on the runtime's worker thread
  std::printf("y is %lld x %lld, loss %.4f\n", static_cast<long long>(y.dim(0)),
              static_cast<long long>(y.dim(1)), loss.item<float>());
}
