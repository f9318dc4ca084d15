// Copies for the last write of a large collective into the caller's buffer.
//
// A buffer larger than the caches is written back to memory anyway; a plain
// store first reads every line it writes (read for ownership), a third more
// memory traffic than the copy needs. Non-temporal stores skip that read and
// leave the caches to the data still in flight (the staging slots).
#pragma once

#include <cstddef>
#include <cstring>

namespace rlx::shm {

// memcpy(to, from, bytes) with non-temporal stores; the two must not overlap.
void stream_copy(void* to, const void* from, std::size_t bytes);

// True when a collective over a buffer of `bytes` per rank should write it
// with stream_copy: from half this machine's last-level cache up.
bool worth_streaming(std::size_t bytes);

// A collective's write into the caller's buffer: stream_copy when
// `streaming` (worth_streaming of the whole buffer), else memcpy.
inline void write_result(void* to, const void* from, std::size_t bytes, bool streaming) {
  streaming ? stream_copy(to, from, bytes) : void(std::memcpy(to, from, bytes));
}

}  // namespace rlx::shm
