#include "rlx/transport/shm/single_copy.h"

#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace rlx::shm {
namespace {

// A child process holding `word` and a buffer of numbered bytes at the same
// addresses as this process (fork copies the address space), which waits
// until its pipe closes.
class Child {
 public:
  Child() {
    for (std::size_t i = 0; i < buffer_.size(); ++i) buffer_[i] = static_cast<std::byte>(i * 7);
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(fds[1]);
      char c;
      (void)!::read(fds[0], &c, 1);
      ::_exit(0);
    }
    ::close(fds[0]);
    release_ = fds[1];
    // The parent's copy changes; the child keeps what fork copied.
    word_ = 0;
    buffer_.fill(std::byte{0});
  }
  ~Child() { finish(); }
  void finish() {
    if (release_ >= 0) ::close(release_);
    release_ = -1;
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }
  std::uint64_t word_address() const { return reinterpret_cast<std::uintptr_t>(&word_); }
  std::uint64_t buffer_address() const { return reinterpret_cast<std::uintptr_t>(buffer_.data()); }
  static constexpr std::uint64_t kWord = 0x5eed'1234'abcd'9876;

 private:
  std::uint64_t word_ = kWord;
  std::array<std::byte, 3 << 20> buffer_{};
  pid_t pid_ = -1;
  int release_ = -1;
};

TEST(SingleCopy, ReadsAPeersBufferWholeAcrossPieces) {
  auto child = std::make_unique<Child>();
  std::vector<std::byte> into(3 << 20);
  const int error = read_peer_memory(child->pid(), child->buffer_address(), into);
  if (error == EPERM) GTEST_SKIP() << "this kernel refuses process_vm_readv here";
  ASSERT_EQ(error, 0);
  for (std::size_t i = 0; i < into.size(); i += 4093) {
    ASSERT_EQ(into[i], static_cast<std::byte>(i * 7)) << i;
  }
}

TEST(SingleCopy, TheProbeFindsThePeersWordAndNothingElse) {
  auto child = std::make_unique<Child>();
  const std::string probed = probe_peer_memory(child->pid(), child->word_address(), Child::kWord);
  if (probed.find("the kernel refused") != std::string::npos) GTEST_SKIP() << probed;
  EXPECT_EQ(probed, "");
  EXPECT_NE(probe_peer_memory(child->pid(), child->word_address(), Child::kWord + 1)
                .find("is another process here"),
            std::string::npos);
}

TEST(SingleCopy, AnUnmappedAddressIsEfaultAndAnExitedPeerEsrch) {
  auto child = std::make_unique<Child>();
  std::vector<std::byte> into(4096);
  EXPECT_EQ(read_peer_memory(child->pid(), 4096, into), EFAULT);
  const pid_t pid = child->pid();
  const std::uint64_t address = child->buffer_address();
  child->finish();
  EXPECT_EQ(read_peer_memory(pid, address, into), ESRCH);
  EXPECT_NE(probe_peer_memory(pid, address, 0).find("no such process"), std::string::npos);
}

}  // namespace
}  // namespace rlx::shm
