#include "rlx/transport/shm/futex.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace rlx::shm {
namespace {

using namespace std::chrono_literals;

// Memory shared with forked children, as a segment is.
template <class T>
class Shared {
 public:
  Shared() {
    void* memory = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
    value_ = new (memory) T{};
  }
  ~Shared() { ::munmap(value_, 4096); }
  T& get() { return *value_; }

 private:
  T* value_ = nullptr;
};

struct Flag {
  Doorbell bell;
  std::atomic<std::uint32_t> value{0};
};

TEST(Doorbell, AConditionNeverMetWaitsUntilTheDeadlineAndNoLonger) {
  Shared<Flag> flag;
  const auto start = Clock::now();
  EXPECT_FALSE(wait_until(flag.get().bell, [] { return false; }, start + 150ms, {}));
  EXPECT_GE(Clock::now() - start, 150ms);
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_EQ(flag.get().bell.sleepers.load(), 0u);
  EXPECT_TRUE(wait_until(flag.get().bell, [] { return true; }, Clock::now() + 1s, {}));
}

// A child process sleeps in the kernel; the parent publishes and rings, and
// the child wakes long before its deadline and long before the 100 ms backstop.
TEST(Doorbell, AnotherProcessSleepingIsWokenByARing) {
  Shared<Flag> flag;
  const pid_t child = ::fork();
  if (child == 0) {
    const bool woken = wait_until(
        flag.get().bell, [&] { return flag.get().value.load(std::memory_order_acquire) == 42; },
        Clock::now() + 20s, {.spin = 0us});
    ::_exit(woken ? 0 : 1);
  }
  const bool slept = wait_until(
      flag.get().bell, [&] { return flag.get().bell.sleepers.load() > 0; }, Clock::now() + 10s, {});
  ASSERT_TRUE(slept);
  const auto start = Clock::now();
  flag.get().value.store(42, std::memory_order_release);
  flag.get().bell.ring();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_LT(Clock::now() - start, 90ms);
}

TEST(Doorbell, RingingWithNobodyAsleepCallsNothingAndWakeAlwaysMovesTheSequence) {
  Shared<Flag> flag;
  flag.get().bell.ring();
  EXPECT_EQ(flag.get().bell.sequence.load(), 0u);
  flag.get().bell.wake();
  EXPECT_EQ(flag.get().bell.sequence.load(), 1u);
}

TEST(Doorbell, ASleeperCallsBeforeSleepFirst) {
  Shared<Flag> flag;
  int calls = 0;
  EXPECT_FALSE(wait_until(
      flag.get().bell, [] { return false; }, Clock::now() + 50ms, {.spin = 0us}, [&] { ++calls; }));
  EXPECT_GE(calls, 1);
}

}  // namespace
}  // namespace rlx::shm
