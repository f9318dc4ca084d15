#include "rlx/core/eval.h"

#include <atomic>
#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "rlx/core/custom.h"
#include "rlx/core/ops.h"
#include "rlx/core/reference_test.h"

namespace rlx {
namespace {

using testing::expect_error;

// An op that copies its input and counts how often it ran.
Array counted_copy(const Array& input, std::atomic<int>& runs) {
  return make_custom("counted_copy", input.shape(), input.dtype(), {input},
                     [&runs](std::span<const Array> in, Array& out) {
                       ++runs;
                       const auto from = in[0].data<float>();
                       std::copy(from.begin(), from.end(), out.mutable_data<float>().begin());
                     });
}

// An op that, when it runs, announces it started and then blocks until the
// test opens the gate (and may throw instead of finishing).
struct Gate {
  std::promise<void> started;
  std::promise<void> open;
  std::shared_future<void> opened = open.get_future().share();
};

Array gated(const Array& input, Gate& gate, bool fail = false) {
  return make_custom("gated", input.shape(), input.dtype(), {input},
                     [&gate, fail](std::span<const Array> in, Array& out) {
                       gate.started.set_value();
                       gate.opened.wait();
                       if (fail) throw std::runtime_error("gated op failed on purpose");
                       out.share_data(in[0]);
                     });
}

TEST(Eval, BuildingComputesNothingAndEvalRunsEachPrimitiveOnce) {
  std::atomic<int> runs{0};
  Array x = Array::from({1.0f, 2.0f, 3.0f}, {3});
  Array c = counted_copy(x, runs);
  Array y = c + c;  // c feeds y twice
  Array z = y * c;
  EXPECT_EQ(runs, 0);
  EXPECT_FALSE(c.is_evaluated());
  EXPECT_FALSE(z.is_evaluated());

  eval(y, z);
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(c.is_evaluated());
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{2, 8, 18}));

  eval(z);
  eval(c);
  Array w = z + c;  // builds on evaluated arrays
  eval(w);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{3, 10, 21}));
}

TEST(Eval, EvaluatedArraysDropTheirInputsSoIntermediatesAreFreed) {
  bool freed = false;
  Array x = Array::adopt(new float[2]{1, 2}, {2}, Dtype::f32, [&freed](void* p) {
    delete[] static_cast<float*>(p);
    freed = true;
  });
  Array y = x + 1.0;
  x = Array();
  EXPECT_FALSE(freed);  // y still needs it
  eval(y);
  EXPECT_TRUE(freed);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 3}));
}

TEST(Eval, HandlesChainsFarDeeperThanTheStack) {
  constexpr int kDepth = 100'000;
  Array one = Array::scalar(1.0f);
  Array y = Array::scalar(0.0f);
  for (int i = 0; i < kDepth; ++i) y = y + one;
  Array unevaluated = y;
  for (int i = 0; i < kDepth; ++i) unevaluated = unevaluated - one;
  eval(y);
  EXPECT_EQ(y.item<float>(), static_cast<float>(kDepth));
  unevaluated = Array();  // destroying a deep pending chain must not recurse
  EXPECT_TRUE(y.is_evaluated());
}

TEST(Eval, PrimitiveExceptionsReachTheCallerAndStick) {
  std::atomic<int> runs{0};
  Array x = Array::from({1.0f}, {1});
  Array bad = make_custom("bad", {1}, Dtype::f32, {x}, [&runs](std::span<const Array>, Array&) {
    ++runs;
    throw std::invalid_argument("bad op says no");
  });
  Array user = bad + x;
  expect_error<std::invalid_argument>([&] { eval(user); }, "bad op says no");
  expect_error<std::invalid_argument>([&] { eval(bad); }, "bad op says no");
  expect_error<std::invalid_argument>([&] { user.data<float>(); }, "bad op says no");
  EXPECT_EQ(runs, 1);  // failed once, reported every time
  EXPECT_FALSE(user.is_evaluated());
  Array fine = x + x;  // the runtime is still usable
  EXPECT_EQ(fine.item<float>(), 2.0f);
}

TEST(Eval, APrimitiveMustGiveItsOutputData) {
  struct Lazy final : Primitive {
    std::string_view name() const override { return "lazy_primitive"; }
    void eval(std::span<const Array>, Array&) const override {}
  };
  Array a(Shape{2}, Dtype::f32, std::make_shared<Lazy>(), {});
  expect_error<Error>([&] { eval(a); }, "lazy_primitive: the primitive gave its output no data");
}

TEST(AsyncEval, EvalAfterAsyncEvalWaitsForItAndComputesNothingTwice) {
  Gate gate;
  std::atomic<int> runs{0};
  Array x = Array::from({1.0f, 2.0f}, {2});
  Array z = counted_copy(gated(x, gate), runs) * 3.0;
  AsyncEval pending = async_eval(z);
  gate.started.get_future().wait();  // the worker is inside the gated op now
  EXPECT_FALSE(pending.ready());
  EXPECT_FALSE(z.is_evaluated());
  gate.open.set_value();
  // Waits for the gated op the worker is running (a second run of it would
  // throw: its promise is already set); the rest is done by whichever thread
  // gets to it first.
  eval(z);
  EXPECT_TRUE(z.is_evaluated());
  EXPECT_EQ(z.to_vector<float>(), (std::vector<float>{3, 6}));
  pending.wait();
  EXPECT_EQ(runs, 1);
}

TEST(AsyncEval, OtherEvaluationsProceedWhileAWorkerPrimitiveBlocks) {
  Gate gate;
  Array x = Array::from({1.0f, 2.0f}, {2});
  Array blocked = gated(x, gate);
  AsyncEval pending = async_eval(blocked);
  gate.started.get_future().wait();
  Array independent = x * x + x;  // must not wait for the blocked primitive
  EXPECT_EQ(independent.to_vector<float>(), (std::vector<float>{2, 6}));
  EXPECT_FALSE(pending.ready());
  gate.open.set_value();
  pending.wait();
  EXPECT_EQ(blocked.to_vector<float>(), (std::vector<float>{1, 2}));
}

TEST(AsyncEval, AnExceptionInAnAsyncPrimitiveSurfacesToWaitersAndEval) {
  Gate gate;
  Array x = Array::from({1.0f}, {1});
  Array failing = gated(x, gate, /*fail=*/true);
  Array user = failing + x;
  AsyncEval pending = async_eval(user);
  gate.started.get_future().wait();
  gate.open.set_value();
  expect_error<std::runtime_error>([&] { pending.wait(); }, "failed on purpose");
  expect_error<std::runtime_error>([&] { eval(user); }, "failed on purpose");
  expect_error<std::runtime_error>([&] { eval(failing); }, "failed on purpose");
}

TEST(AsyncEval, RunsInOrderOnOneLongLivedWorkerThread) {
  std::vector<std::thread::id> threads;  // written by the worker only, read after waiting
  auto record = [&threads](const Array& input) {
    return make_custom("record_thread", input.shape(), input.dtype(), {input},
                       [&threads](std::span<const Array> in, Array& out) {
                         threads.push_back(std::this_thread::get_id());
                         out.share_data(in[0]);
                       });
  };
  Array x = Array::from({1.0f}, {1});
  AsyncEval first = async_eval(record(x));
  AsyncEval second = async_eval(record(x));
  second.wait();
  EXPECT_TRUE(first.ready());  // FIFO: the earlier request finished first
  first.wait();
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[0], threads[1]);
  EXPECT_NE(threads[0], std::this_thread::get_id());
}

TEST(Eval, ConcurrentEvalsOfOverlappingGraphsShareTheWork) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> runs{0};
    Array x = Array::from(testing::sample<float>(64, 1), {8, 8});
    Array shared = counted_copy(exp(x), runs);
    Array left = sum(shared * 2.0, 0);
    Array right = sum(shared + x, 1);
    std::thread other([&] { eval(left); });
    eval(right);
    AsyncEval third = async_eval(shared - 1.0);
    other.join();
    third.wait();
    EXPECT_EQ(runs, 1);
    const auto s = shared.data<float>();
    const auto xs = x.data<float>();
    EXPECT_FLOAT_EQ(left.data<float>()[0],
                    2 * (s[0] + s[8] + s[16] + s[24] + s[32] + s[40] + s[48] + s[56]));
    float row = 0;
    for (int i = 0; i < 8; ++i) row += s[i] + xs[i];
    EXPECT_FLOAT_EQ(right.data<float>()[0], row);
  }
}

}  // namespace
}  // namespace rlx
