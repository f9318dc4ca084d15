#include "rlx/transport/spare_buffers.h"

#include <algorithm>
#include <utility>

namespace rlx {

std::vector<std::byte> SpareBuffers::take(std::size_t length) {
  if (length >= kSmallest) {
    std::unique_lock lock(mutex_);
    auto best = spares_.end();
    for (auto spare = spares_.begin(); spare != spares_.end(); ++spare) {
      const std::size_t capacity = spare->capacity();
      if (capacity < length || capacity / 2 > length) continue;
      if (best == spares_.end() || capacity < best->capacity()) best = spare;
    }
    if (best != spares_.end()) {
      std::vector<std::byte> buffer = std::move(*best);
      spares_.erase(best);
      bytes_ -= buffer.capacity();
      lock.unlock();
      // Shrinking keeps the bytes; growing within the capacity fills only
      // the difference.
      buffer.resize(length);
      return buffer;
    }
  }
  return std::vector<std::byte>(length);
}

void SpareBuffers::give_back(std::vector<std::byte>&& buffer) noexcept {
  const std::size_t capacity = buffer.capacity();
  if (capacity < kSmallest || capacity > kMostBytes) return;
  std::lock_guard lock(mutex_);
  try {
    spares_.push_back(std::move(buffer));
  } catch (...) {
    return;  // out of memory for the bookkeeping: the buffer is freed instead
  }
  bytes_ += capacity;
  while (spares_.size() > kMostBuffers || bytes_ > kMostBytes) {
    bytes_ -= spares_.front().capacity();
    spares_.pop_front();
  }
}

std::size_t SpareBuffers::kept_buffers() const {
  std::lock_guard lock(mutex_);
  return spares_.size();
}

std::size_t SpareBuffers::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace rlx
