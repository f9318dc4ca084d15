// Single copy between the processes of one host: a rank reads a peer's
// buffer straight into its own with process_vm_readv (cross-memory attach,
// CMA), one copy instead of staging's two, with no kernel module.
//
// The kernel allows it when the reader may ptrace the peer: the same user,
// and neither Yama's ptrace_scope (1 and up) nor a seccomp profile that
// refuses the call nor a non-dumpable peer without CAP_SYS_PTRACE stands in
// the way.
// Set-up therefore probes every peer once (probe_peer_memory) and the ranks
// of a host use single copy only when every one of them could read every
// other; a refusal later is an error naming the peer, never a silent change
// of protocol, since every rank of a call must move data the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace rlx::shm {

// Reads `into.size()` bytes at `address` of process `pid` into `into`.
// Returns 0, or the errno of the failure (EFAULT for a short read: the range
// is not all mapped in the peer).
int read_peer_memory(std::int32_t pid, std::uint64_t address, std::span<std::byte> into);

// Empty when this process can read process `pid`'s memory and finds
// `expected` at `address` (the peer's word, told over an authenticated
// channel: a pid of another namespace, or another process, fails it), else
// why not, in words for the log.
std::string probe_peer_memory(std::int32_t pid, std::uint64_t address, std::uint64_t expected);

// What an errno of read_peer_memory means, for errors and the log.
std::string describe_read_failure(int error);

}  // namespace rlx::shm
