// Python objects as rlx buffers, in place: any C-contiguous object of the
// buffer protocol (numpy arrays, bytearray, memoryview, array.array), or an
// object whose .numpy() returns one that shares its memory (a torch CPU
// tensor), or, to read, a DLPack exporter of CPU memory (numpy.from_dlpack).
// Nothing is copied; the object stays locked (numpy refuses to resize it)
// while a Buffer holds it.
#pragma once

#include <optional>
#include <string_view>

#include <pybind11/pybind11.h>

#include "rlx/core/dtype.h"
#include "rlx/transport/transport.h"

namespace rlx::python {

// The dtype a caller names: rlx's names ("f32", "bf16", ...) or numpy's
// ("float32", "bfloat16", ...); None leaves it to the buffer's format.
std::optional<Dtype> dtype_named(const pybind11::object& name);

class Buffer {
 public:
  enum class Access { read, write };
  // `what` names the argument in errors ("all_gather's output").
  Buffer(const pybind11::handle& object, Access access, std::string_view what);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::size_t bytes() const { return static_cast<std::size_t>(view_.len); }
  std::span<std::byte> writable() const { return {static_cast<std::byte*>(view_.buf), bytes()}; }
  std::span<const std::byte> readable() const { return writable(); }
  // As elements of `dtype`, or of the format's dtype when none is named
  // (numpy has no bfloat16: a uint16 array with dtype="bf16" is one).
  ElementSpan elements(std::optional<Dtype> dtype) const;

 private:
  pybind11::object owner_;  // the object itself, or what its .numpy() returned
  Py_buffer view_{};
  std::string what_;
};

}  // namespace rlx::python
