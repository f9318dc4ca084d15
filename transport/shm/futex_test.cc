#include "transport/shm/futex.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace rlx::shm {
namespace {

using namespace std::chrono_literals;

// A word in memory shared with forked children, as a segment's flags are.
class SharedWord {
 public:
  SharedWord() {
    void* memory = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
    word_ = new (memory) std::atomic<std::uint32_t>(0);
  }
  ~SharedWord() { ::munmap(word_, 4096); }
  std::atomic<std::uint32_t>& get() { return *word_; }

 private:
  std::atomic<std::uint32_t>* word_ = nullptr;
};

TEST(Futex, AnUnchangedWordWaitsUntilTheDeadlineAndNoLonger) {
  SharedWord word;
  const auto start = Clock::now();
  EXPECT_FALSE(wait_while_equal(word.get(), 0, start + 150ms));
  EXPECT_GE(Clock::now() - start, 150ms);
  EXPECT_LT(Clock::now() - start, 1s);
  EXPECT_TRUE(wait_while_equal(word.get(), 7, Clock::now() + 1s));  // already different
}

// A child process sleeps in the kernel on the word; the parent changes it
// and wakes it long before the child's deadline.
TEST(Futex, AnotherProcessIsWokenWhenTheWordChanges) {
  SharedWord word, started;
  const pid_t child = ::fork();
  if (child == 0) {
    started.get().store(1);
    wake_all(started.get());
    const bool woken = wait_while_equal(word.get(), 0, Clock::now() + 20s, {.spin = 0us});
    ::_exit(woken && word.get().load() == 42 ? 0 : 1);
  }
  ASSERT_TRUE(wait_while_equal(started.get(), 0, Clock::now() + 10s));
  std::this_thread::sleep_for(50ms);  // let the child reach the kernel
  const auto start = Clock::now();
  word.get().store(42, std::memory_order_release);
  wake_all(word.get());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_LT(Clock::now() - start, 5s);
}

}  // namespace
}  // namespace rlx::shm
