// Memory allocated and registered with the device once, at start-up, and
// reused for the life of the transport: nothing is registered on the hot path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "rlx/transport/errors.h"

struct ibv_pd;
struct ibv_mr;

namespace rlx::verbs {

class RegisteredMemory {
 public:
  // Maps `bytes` of zeroed memory and registers it with `access` (ibv_access_flags).
  // Throws CollectiveError (resource_exhausted) naming `purpose`, with the
  // locked-memory limit as the usual cause.
  RegisteredMemory(ibv_pd* pd, std::size_t bytes, int access, const char* purpose,
                   const ErrorSite& site);
  ~RegisteredMemory();
  RegisteredMemory(const RegisteredMemory&) = delete;
  RegisteredMemory& operator=(const RegisteredMemory&) = delete;

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::uint32_t lkey() const;
  std::uint32_t rkey() const;

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  ibv_mr* mr_ = nullptr;
};

}  // namespace rlx::verbs
