// Which ranks can share memory: those whose host identity is equal.
//
// The identity is the kernel's boot id, the host name (network-namespace
// "hosts" with a UTS namespace each count as separate hosts, as their
// launcher means them to), the shared-memory directory's device and inode
// (containers with a private /dev/shm count as separate hosts) and the user.
#pragma once

#include <cstdint>
#include <string>

namespace rlx::shm {

struct HostIdentity {
  std::uint64_t key = 0;
  std::string name;  // the host name, for messages
};

// This process's host identity, for segments in `directory`.
HostIdentity this_host(const std::string& directory);

}  // namespace rlx::shm
