#include "rlx/core/buffer.h"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <new>
#include <unordered_map>

namespace rlx {
namespace {

constexpr std::align_val_t kAlign{kBufferAlignment};
constexpr std::size_t kPage = 4096;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheBuffers = false;
#else
constexpr bool kCacheBuffers = true;
#endif

// Freed large allocations by size (a multiple of the page size).
class BufferCache {
 public:
  void* take(std::size_t bytes) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(bytes);
    if (it == free_.end()) return nullptr;
    void* data = it->second;
    free_.erase(it);
    cached_ -= bytes;
    return data;
  }

  // False when the cache is full: the caller frees `data` itself.
  bool keep(void* data, std::size_t bytes) {
    std::lock_guard lock(mutex_);
    if (cached_ + bytes > kBufferCacheLimit) return false;
    free_.emplace(bytes, data);
    cached_ += bytes;
    return true;
  }

 private:
  std::mutex mutex_;
  std::unordered_multimap<std::size_t, void*> free_;
  std::size_t cached_ = 0;
};

// Never destroyed: arrays in static storage may free buffers after it would be.
BufferCache& cache() {
  static auto* instance = new BufferCache;
  return *instance;
}

// The unit of small allocations: one cache line.
struct alignas(kBufferAlignment) Line {
  std::byte bytes[kBufferAlignment];
};

}  // namespace

Buffer allocate_buffer(std::size_t bytes) {
  if (!kCacheBuffers || bytes < kMinCachedBuffer) {
    // One allocation for the data and the reference count.
    const std::size_t lines = std::max<std::size_t>(1, (bytes + sizeof(Line) - 1) / sizeof(Line));
    std::shared_ptr<Line[]> data = std::make_shared_for_overwrite<Line[]>(lines);
    return Buffer(data, data.get());
  }
  const std::size_t rounded = (bytes + kPage - 1) / kPage * kPage;
  void* data = cache().take(rounded);
  if (data == nullptr) data = ::operator new(rounded, kAlign);
  // shared_ptr calls the deleter itself if allocating its control block throws.
  return Buffer(data, [rounded](void* p) {
    if (!cache().keep(p, rounded)) ::operator delete(p, kAlign);
  });
}

}  // namespace rlx
