#include "rlx/transport/shm/single_copy.h"

#include <cerrno>
#include <cstring>

#include <sys/uio.h>

namespace rlx::shm {

int read_peer_memory(std::int32_t pid, std::uint64_t address, std::span<std::byte> into) {
  std::size_t done = 0;
  while (done < into.size()) {
    iovec local{into.data() + done, into.size() - done};
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the peer's address, not ours
    iovec remote{reinterpret_cast<void*>(address + done), into.size() - done};
    const ssize_t got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (got == 0) return EFAULT;
    done += static_cast<std::size_t>(got);
  }
  return 0;
}

std::string describe_read_failure(int error) {
  switch (error) {
    case EPERM:
    case EACCES:
      return "the kernel refused (" + std::string(std::strerror(error)) +
             "): another user, Yama's ptrace_scope, a seccomp profile or a non-dumpable process";
    case ESRCH:
      return "no such process (it exited)";
    case EFAULT:
      return "the address is not mapped in that process";
    case ENOSYS:
      return "this kernel has no process_vm_readv";
    default:
      return std::strerror(error);
  }
}

std::string probe_peer_memory(std::int32_t pid, std::uint64_t address, std::uint64_t expected) {
  std::uint64_t word = 0;
  const int error = read_peer_memory(pid, address, std::as_writable_bytes(std::span(&word, 1)));
  if (error != 0)
    return "process_vm_readv of pid " + std::to_string(pid) + ": " + describe_read_failure(error);
  if (word != expected) {
    return "pid " + std::to_string(pid) +
           " is another process here (a pid namespace of its own?): its word differs";
  }
  return {};
}

}  // namespace rlx::shm
