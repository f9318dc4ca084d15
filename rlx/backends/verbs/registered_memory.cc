#include "rlx/backends/verbs/registered_memory.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/resource.h>

namespace rlx::verbs {
namespace {

std::string memlock_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return "unknown";
  return limit.rlim_cur == RLIM_INFINITY ? "unlimited" : format_bytes(limit.rlim_cur);
}

}  // namespace

RegisteredMemory::RegisteredMemory(ibv_pd* pd, std::size_t bytes, int access, const char* purpose,
                                   const ErrorSite& site)
    : size_(bytes) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    throw CollectiveError(ErrorKind::resource_exhausted, site,
                          std::string("cannot allocate ") + format_bytes(bytes) + " for " +
                              purpose + ": " + std::strerror(errno));
  }
  data_ = static_cast<std::byte*>(memory);
  mr_ = ibv_reg_mr(pd, memory, bytes, access);
  if (mr_ == nullptr) {
    const int code = errno;
    ::munmap(memory, bytes);
    throw CollectiveError(
        ErrorKind::resource_exhausted, site,
        std::string("ibv_reg_mr of ") + format_bytes(bytes) + " for " + purpose +
            " failed: " + std::strerror(code),
        "registered memory is locked memory: the locked-memory limit here is " + memlock_limit() +
            " (raise it with `ulimit -l unlimited` or /etc/security/limits.conf)");
  }
}

RegisteredMemory::~RegisteredMemory() {
  if (mr_ != nullptr) ibv_dereg_mr(mr_);
  if (data_ != nullptr) ::munmap(data_, size_);
}

std::uint32_t RegisteredMemory::lkey() const { return mr_->lkey; }
std::uint32_t RegisteredMemory::rkey() const { return mr_->rkey; }

}  // namespace rlx::verbs
