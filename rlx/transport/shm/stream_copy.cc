#include "rlx/transport/shm/stream_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <emmintrin.h>
#include <unistd.h>

namespace rlx::shm {

void stream_copy(void* to, const void* from, std::size_t bytes) {
  auto* out = static_cast<std::byte*>(to);
  const auto* in = static_cast<const std::byte*>(from);
  // Plain stores up to the destination's first 16-byte boundary.
  const std::size_t head = std::min(bytes, (16 - reinterpret_cast<std::uintptr_t>(out) % 16) % 16);
  std::memcpy(out, in, head);
  out += head;
  in += head;
  bytes -= head;
  std::size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + 48), d);
  }
  std::memcpy(out + i, in + i, bytes - i);
  _mm_sfence();  // the stores are visible before whatever the caller publishes next
}

bool worth_streaming(std::size_t bytes) {
  static const std::size_t threshold = [] {
    const long cache = ::sysconf(_SC_LEVEL3_CACHE_SIZE);
    return cache > 0 ? static_cast<std::size_t>(cache) / 2 : std::size_t{8} << 20;
  }();
  return bytes >= threshold;
}

}  // namespace rlx::shm
