// eval() computes same-key batched arrays together (make_batched_custom).
#include <atomic>
#include <numeric>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "rlx/core/custom.h"
#include "rlx/core/eval.h"
#include "rlx/core/ops.h"

namespace rlx {
namespace {

// Doubles each input; records how many arrays each call computed.
Array batched_double(const Array& input, std::vector<std::size_t>& calls,
                     std::string key = "double") {
  return make_batched_custom("batched_double", std::move(key), input.shape(), input.dtype(),
                             {input}, [&calls](std::span<const Primitive::BatchItem> items) {
                               calls.push_back(items.size());
                               for (const auto& item : items) {
                                 const auto in = item.inputs[0].data<float>();
                                 auto out = item.output->mutable_data<float>();
                                 for (std::size_t i = 0; i < in.size(); ++i) out[i] = 2 * in[i];
                               }
                             });
}

class Batching : public ::testing::Test {
 protected:
  void TearDown() override { set_batch_bytes_cap(std::size_t{25} << 20); }
};

TEST_F(Batching, IndependentArraysOfOneKeyShareOneCall) {
  std::vector<std::size_t> calls;
  std::vector<Array> outs;
  for (int i = 0; i < 10; ++i) outs.push_back(batched_double(full({4}, i) + 1.0, calls));
  eval(std::span<const Array>(outs));
  EXPECT_EQ(calls, std::vector<std::size_t>{10});
  for (int i = 0; i < 10; ++i) {
    for (float v : outs[static_cast<std::size_t>(i)].to_vector<float>()) EXPECT_EQ(v, 2 * (i + 1));
  }
}

TEST_F(Batching, AnArrayReadingABatchedOneFlushesTheBucketFirst) {
  std::vector<std::size_t> calls;
  const Array a = batched_double(full({2}, 1.0), calls);
  const Array b = batched_double(full({2}, 2.0), calls);
  const Array c = batched_double(a + 1.0, calls);  // needs a computed
  eval(b, c);
  EXPECT_EQ(calls, (std::vector<std::size_t>{2, 1}));
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{6, 6}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{4, 4}));
}

TEST_F(Batching, KeysNeverMixAndTheCapSplitsBuckets) {
  std::vector<std::size_t> calls;
  std::vector<Array> outs;
  for (int i = 0; i < 4; ++i) outs.push_back(batched_double(full({256}, i), calls, "x"));
  outs.push_back(batched_double(full({256}, 9), calls, "y"));
  set_batch_bytes_cap(2 * 256 * sizeof(float));
  eval(std::span<const Array>(outs));
  EXPECT_EQ(calls, (std::vector<std::size_t>{2, 2, 1}));
}

// Keys interleaved in the graph (two collective groups' all-reduces on a
// rank in both) still fuse per key, as on a rank that has one of them.
TEST_F(Batching, InterleavedKeysFuseEachIntoItsOwnCall) {
  std::vector<std::size_t> calls;
  std::vector<Array> outs;
  for (int i = 0; i < 6; ++i) {
    outs.push_back(batched_double(full({4}, i), calls, i % 2 == 0 ? "group a" : "group b"));
  }
  eval(std::span<const Array>(outs));
  EXPECT_EQ(calls, (std::vector<std::size_t>{3, 3}));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(outs[static_cast<std::size_t>(i)].to_vector<float>()[0], 2 * i);
}

// An array that reads one key's result computes that bucket only; the other
// key's keeps filling.
TEST_F(Batching, AReaderFlushesOnlyTheBucketItReads) {
  std::vector<std::size_t> a_calls, b_calls;
  const Array a1 = batched_double(full({2}, 1.0), a_calls, "a");
  const Array b1 = batched_double(full({2}, 2.0), b_calls, "b");
  const Array a2 = batched_double(a1 + 1.0, a_calls, "a");  // needs a1 computed
  const Array b2 = batched_double(full({2}, 3.0), b_calls, "b");
  eval(std::vector<Array>{b1, a2, b2});
  EXPECT_EQ(a_calls, (std::vector<std::size_t>{1, 1}));
  EXPECT_EQ(b_calls, (std::vector<std::size_t>{2}));
  EXPECT_EQ(a2.to_vector<float>(), (std::vector<float>{6, 6}));
  EXPECT_EQ(b2.to_vector<float>(), (std::vector<float>{6, 6}));
}

TEST_F(Batching, CapZeroGivesEveryArrayItsOwnCall) {
  std::vector<std::size_t> calls;
  std::vector<Array> outs;
  for (int i = 0; i < 3; ++i) outs.push_back(batched_double(full({2}, i), calls));
  set_batch_bytes_cap(0);
  eval(std::span<const Array>(outs));
  EXPECT_EQ(calls, (std::vector<std::size_t>{1, 1, 1}));
}

TEST_F(Batching, AFailedBatchFailsEveryArrayInIt) {
  std::vector<Array> outs;
  for (int i = 0; i < 3; ++i) {
    outs.push_back(make_batched_custom(
        "fails", "fails", {2}, Dtype::f32, {full({2}, i)},
        [](std::span<const Primitive::BatchItem>) { throw std::runtime_error("batch broke"); }));
  }
  EXPECT_THROW(eval(std::span<const Array>(outs)), std::runtime_error);
  for (const Array& a : outs) EXPECT_THROW(eval(a), std::runtime_error);
}

TEST_F(Batching, DeferredArraysFailWhenAnotherPrimitiveThrowsFirst) {
  std::vector<std::size_t> calls;
  const Array deferred = batched_double(full({2}, 1.0), calls);
  const Array broken =
      make_custom("broken", {2}, Dtype::f32, {full({2}, 0.0)},
                  [](std::span<const Array>, Array&) { throw std::runtime_error("broken"); });
  EXPECT_THROW(eval(deferred, broken), std::runtime_error);
  EXPECT_TRUE(calls.empty());
  EXPECT_THROW(eval(deferred), Error);  // failed, not left running: nobody waits forever
}

}  // namespace
}  // namespace rlx
