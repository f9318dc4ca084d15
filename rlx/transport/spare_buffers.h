// Message buffers kept for the next message of about their size.
//
// A transport that receives into a std::vector pays for every page of a new
// one: the vector zero-fills it, and above glibc's mmap threshold (32 MiB at
// most) each allocation maps fresh pages that fault in one by one. A message
// copied out into its receiver's buffer gives its vector back here, and the
// next message of about its size is read into it: warm pages, no fill.
#pragma once

#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

namespace rlx {

class SpareBuffers {
 public:
  // Buffers below this are not kept: malloc reuses their memory anyway.
  static constexpr std::size_t kSmallest = 64 * 1024;
  // At most this many are kept, and this many bytes in all; past either,
  // the least recently given back goes first.
  static constexpr std::size_t kMostBuffers = 4;
  static constexpr std::size_t kMostBytes = std::size_t{256} << 20;

  // A buffer of `length` bytes whose contents are unspecified (the caller
  // overwrites them all): a kept one of at most twice that capacity when
  // there is one, else a new one. Throws what allocation throws.
  std::vector<std::byte> take(std::size_t length);
  // Keeps `buffer` for a later take() when it is large enough to be worth it.
  void give_back(std::vector<std::byte>&& buffer) noexcept;

  std::size_t kept_buffers() const;
  std::size_t kept_bytes() const;

 private:
  mutable std::mutex mutex_;
  std::deque<std::vector<std::byte>> spares_;  // least recently given back first
  std::size_t bytes_ = 0;                      // their capacities
};

}  // namespace rlx
