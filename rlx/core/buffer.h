// Storage behind evaluated arrays.
#pragma once

#include <cstddef>
#include <memory>

namespace rlx {

// Shared ownership of an array's bytes. Allocated buffers are 64-byte aligned
// (a cache line, and enough for any SIMD load); adopted ones keep the owner's
// pointer and deleter.
using Buffer = std::shared_ptr<void>;

inline constexpr std::size_t kBufferAlignment = 64;

// Freed buffers of at least this many bytes are kept for reuse, up to
// kBufferCacheLimit bytes in all: a fresh large allocation comes from the OS
// and is page-faulted in on first touch, which costs as much as a simple
// kernel over it. (Not under AddressSanitizer, so it sees every reuse.)
inline constexpr std::size_t kMinCachedBuffer = 64 * 1024;
inline constexpr std::size_t kBufferCacheLimit = 256 * 1024 * 1024;

// An uninitialised, 64-byte aligned buffer of `bytes` bytes.
Buffer allocate_buffer(std::size_t bytes);

}  // namespace rlx
