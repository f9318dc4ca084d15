// A compiled graph's runs after the first allocate nothing: every operator
// new and malloc of the process is counted (this test binary replaces them).
// Sanitizer builds keep their own allocator, so there the test is skipped.
#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "rlx/core/compiled_function.h"
#include "rlx/core/compiled_graph.h"
#include "rlx/core/ops.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RLX_COUNTS_ALLOCATIONS 0
#else
#define RLX_COUNTS_ALLOCATIONS 1
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
}  // namespace

#if RLX_COUNTS_ALLOCATIONS
// A gdb breakpoint on rlx_note_hit shows who allocated.
extern "C" __attribute__((noinline)) void rlx_note_hit() { asm volatile(""); }

namespace {
void note_allocation() {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1);
    rlx_note_hit();
  }
}
}  // namespace

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);

int posix_memalign(void** out, std::size_t alignment, std::size_t bytes) {
  note_allocation();
  *out = __libc_memalign(alignment, bytes ? bytes : 1);
  return *out ? 0 : 12;  // ENOMEM
}
void* aligned_alloc(std::size_t alignment, std::size_t bytes) {
  note_allocation();
  return __libc_memalign(alignment, bytes ? bytes : 1);
}
void* memalign(std::size_t alignment, std::size_t bytes) {
  note_allocation();
  return __libc_memalign(alignment, bytes ? bytes : 1);
}

void* malloc(std::size_t bytes) {
  note_allocation();
  return __libc_malloc(bytes);
}
void* calloc(std::size_t count, std::size_t bytes) {
  note_allocation();
  return __libc_calloc(count, bytes);
}
void* realloc(void* old, std::size_t bytes) {
  note_allocation();
  return __libc_realloc(old, bytes);
}
}

namespace {
void* counted_new(std::size_t bytes, std::size_t alignment) {
  note_allocation();
  void* data = alignment <= alignof(std::max_align_t)
                   ? __libc_malloc(bytes ? bytes : 1)
                   : __libc_memalign(alignment, bytes ? bytes : 1);
  if (!data) throw std::bad_alloc();
  return data;
}
}  // namespace

void* operator new(std::size_t bytes) { return counted_new(bytes, 0); }
void* operator new[](std::size_t bytes) { return counted_new(bytes, 0); }
void* operator new(std::size_t bytes, std::align_val_t a) {
  return counted_new(bytes, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t bytes, std::align_val_t a) {
  return counted_new(bytes, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

namespace rlx {
namespace {

// Counts what `runs` calls of `fn` allocate.
template <class Fn>
long allocations_during(int runs, Fn fn) {
  g_allocations = 0;
  g_counting = true;
  for (int i = 0; i < runs; ++i) fn();
  g_counting = false;
  return g_allocations.load();
}

TEST(PlannedRunAllocations, RunsAfterTheFirstAllocateNothing) {
  if (!RLX_COUNTS_ALLOCATIONS) GTEST_SKIP() << "sanitizers own the allocator";
  // The small model, and every kind of kernel besides: matmul, a
  // broadcast bias, gelu, a reshape, a transpose and reductions along the
  // last and a leading axis.
  Graph graph;
  Node x = graph.input("x", {8, 128});
  Node w1 = graph.param("w1", {128, 32});
  Node b1 = graph.param("b1", {32});
  Node w2 = graph.param("w2", {32, 10});
  Node h = graph.gelu(graph.add(graph.matmul(x, w1), b1));
  Node logits = graph.matmul(h, w2);
  Node t = graph.transpose(graph.reshape(logits, {4, 20}));
  graph.set_outputs({logits, graph.sum(t, {0}), graph.max(t, {1}), graph.mean(h, {0})});
  CompiledGraph compiled = compile(graph);
  compiled.set_param("w1", std::vector<float>(128 * 32, 0.01f));
  compiled.set_param("b1", std::vector<float>(32, 0.5f));
  compiled.set_param("w2", std::vector<float>(32 * 10, -0.02f));
  std::vector<float> xv(8 * 128, 1.0f);
  const Value inputs[] = {xv};
  compiled.run_slots(inputs);  // lays out the arena
  float checksum = 0;
  const long counted = allocations_during(100, [&] {
    xv[0] += 1;
    checksum += compiled.run_slots(inputs)[0].data<float>()[0];
  });
  EXPECT_EQ(counted, 0) << "allocations in 100 runs";
  EXPECT_NE(checksum, 0.0f);
  // The hook counts: a named run copies its outputs.
  EXPECT_GT(allocations_during(1, [&] { compiled.run({{"x", xv}}); }), 0);
}

TEST(PlannedRunAllocations, ACompiledFunctionReplaysASeenShapeWithoutAllocating) {
  if (!RLX_COUNTS_ALLOCATIONS) GTEST_SKIP() << "sanitizers own the allocator";
  CompiledFunction function([](std::span<const InputSpec> inputs) {
    Graph graph;
    const Node x = graph.input("x", inputs[0].shape);
    graph.set_outputs({graph.tanh(graph.mul(x, x))});
    return graph;
  });
  const Array small = Array::from(std::vector<float>(6, 0.5f), {2, 3});
  const Array large = Array::from(std::vector<float>(64, 0.25f), {8, 8});
  function.run({&small, 1});
  function.run({&large, 1});
  function.run({&small, 1});  // each shape's first run lays out its arena
  function.run({&large, 1});
  EXPECT_EQ(allocations_during(50,
                               [&] {
                                 function.run({&small, 1});
                                 function.run({&large, 1});
                               }),
            0);
  EXPECT_EQ(function.compiled(), 2u);
}

}  // namespace
}  // namespace rlx
