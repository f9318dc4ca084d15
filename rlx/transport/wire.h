// Little-endian encoding of the fixed-layout messages rlx puts on the wire
// (frame headers, handshakes, rendezvous). Readers check every bound, so a
// malformed or truncated message is an error and never an out-of-range read.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::wire {

// What a ByteReader throws on short or malformed input.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Stores `v` little-endian in the sizeof(T) bytes at `out`: for fixed
// layouts whose size the caller's types fix (compilers make it one store).
template <class T>
void store_little_endian(std::byte* out, T v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(out, &v, sizeof(T));
  } else {
    for (std::size_t i = 0; i < sizeof(T); ++i) out[i] = static_cast<std::byte>(v >> (8 * i));
  }
}

// The little-endian writes of both writers below, once.
template <class Self>
class LittleEndianWriter {
 public:
  void u8(std::uint8_t v) { self().put_byte(static_cast<std::byte>(v)); }
  void u16(std::uint16_t v) { put(v); }
  void u32(std::uint32_t v) { put(v); }
  void u64(std::uint64_t v) { put(v); }
  void raw(std::span<const std::byte> data) {
    for (std::byte b : data) self().put_byte(b);
  }

 private:
  template <class T>
  void put(T v) {
    for (std::size_t i = 0; i < sizeof(T); ++i) u8(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  Self& self() { return static_cast<Self&>(*this); }
};

// Writes a message of any length into a vector it owns (handshakes,
// rendezvous messages).
class ByteWriter : public LittleEndianWriter<ByteWriter> {
 public:
  ByteWriter() { bytes_.reserve(64); }
  void put_byte(std::byte b) { bytes_.push_back(b); }
  void raw(std::span<const std::byte> data) {
    bytes_.insert(bytes_.end(), data.begin(), data.end());
  }
  // A u32 length, then the bytes.
  void string(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    raw(std::as_bytes(std::span(s.data(), s.size())));
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }
  std::vector<std::byte> take() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
};

// Writes into storage the caller owns, so a fixed-size header costs no
// allocation per message; writing past its end is a bug (logic_error).
class SpanWriter : public LittleEndianWriter<SpanWriter> {
 public:
  explicit SpanWriter(std::span<std::byte> out) : out_(out) {}
  void put_byte(std::byte b) {
    if (written_ == out_.size()) throw std::logic_error("SpanWriter: write past the end");
    out_[written_++] = b;
  }
  std::size_t written() const { return written_; }

 private:
  std::span<std::byte> out_;
  std::size_t written_ = 0;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  std::uint8_t u8() { return static_cast<std::uint8_t>(take(1)[0]); }
  std::uint16_t u16() { return get<std::uint16_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  std::span<const std::byte> raw(std::size_t n) { return take(n); }
  // A u32 length (at most `max_length`), then the bytes.
  std::string string(std::size_t max_length) {
    const std::uint32_t n = u32();
    if (n > max_length) {
      throw DecodeError("string of " + std::to_string(n) + " bytes exceeds the limit of " +
                        std::to_string(max_length));
    }
    auto data = take(n);
    return {reinterpret_cast<const char*>(data.data()), data.size()};
  }
  std::size_t remaining() const { return bytes_.size() - offset_; }
  void expect_end() const {
    if (remaining() != 0) {
      throw DecodeError(std::to_string(remaining()) + " unexpected trailing bytes");
    }
  }

 private:
  std::span<const std::byte> take(std::size_t n) {
    if (n > remaining()) {
      throw DecodeError("message truncated: needed " + std::to_string(n) + " more bytes, " +
                        std::to_string(remaining()) + " left");
    }
    auto out = bytes_.subspan(offset_, n);
    offset_ += n;
    return out;
  }
  template <class T>
  T get() {
    auto data = take(sizeof(T));
    T v = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      v |= static_cast<T>(static_cast<T>(static_cast<std::uint8_t>(data[i])) << (8 * i));
    }
    return v;
  }

  std::span<const std::byte> bytes_;
  std::size_t offset_ = 0;
};

}  // namespace rlx::wire
