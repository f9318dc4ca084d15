#include "bindings/python/buffers.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "bindings/python/errors.h"

namespace py = pybind11;

namespace rlx::python {
namespace {

// The struct-module format of one element (numpy's, with a byte-order
// prefix on some platforms), as rlx's dtype.
std::optional<Dtype> dtype_of_format(std::string_view format, std::size_t itemsize) {
  if (!format.empty() && (format[0] == '@' || format[0] == '=' || format[0] == '<')) {
    format.remove_prefix(1);
  }
  if (format.size() != 1) return std::nullopt;
  switch (format[0]) {
    case 'f':
      return itemsize == 4 ? std::optional(Dtype::f32) : std::nullopt;
    case 'd':
      return itemsize == 8 ? std::optional(Dtype::f64) : std::nullopt;
    case 'e':
      return itemsize == 2 ? std::optional(Dtype::f16) : std::nullopt;
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 4) return Dtype::i32;
      if (itemsize == 8) return Dtype::i64;
      return std::nullopt;
    case 'B':
      return Dtype::u8;
    case '?':
      return Dtype::boolean;
    default:
      return std::nullopt;
  }
}

enum class Via { buffer_protocol, numpy_view, dlpack };

// The object that exports `object`'s memory, and how it was found.
std::pair<py::object, Via> exporter_of(const py::handle& object) {
  if (PyObject_CheckBuffer(object.ptr()) != 0) {
    return {py::reinterpret_borrow<py::object>(object), Via::buffer_protocol};
  }
  // A torch CPU tensor has no buffer protocol; .numpy() is a view of it (a
  // check below makes sure). numpy's view of another DLPack exporter is
  // read-only (numpy 1.24), so those are inputs only.
  if (py::hasattr(object, "numpy") && py::hasattr(object, "data_ptr")) {
    return {object.attr("numpy")(), Via::numpy_view};
  }
  if (py::hasattr(object, "__dlpack__")) {
    return {py::module_::import("numpy").attr("from_dlpack")(object), Via::dlpack};
  }
  return {py::none(), Via::buffer_protocol};
}

}  // namespace

std::optional<Dtype> dtype_named(const py::object& name) {
  if (name.is_none()) return std::nullopt;
  // A numpy dtype or scalar type (np.float32) by its name.
  std::string text;
  if (py::isinstance<py::str>(name)) {
    text = py::str(name);
  } else {
    try {
      text = py::str(py::module_::import("numpy").attr("dtype")(name).attr("name"));
    } catch (py::error_already_set& error) {
      throw BadArgument{"dtype " + std::string(py::repr(name)) +
                        " is not a dtype: " + error.what()};
    }
  }
  static constexpr std::pair<std::string_view, Dtype> kNumpyNames[] = {
      {"float32", Dtype::f32},   {"float64", Dtype::f64}, {"float16", Dtype::f16},
      {"bfloat16", Dtype::bf16}, {"int32", Dtype::i32},   {"int64", Dtype::i64},
      {"uint8", Dtype::u8},      {"bool", Dtype::boolean}};
  for (const auto& [numpy_name, dtype] : kNumpyNames) {
    if (text == numpy_name) return dtype;
  }
  try {
    return dtype_from_name(text);
  } catch (const Error& error) {
    throw BadArgument{std::string(error.what()) +
                      " (numpy's names work too: float32, bfloat16, ...)"};
  }
}

Buffer::Buffer(const py::handle& object, Access access, std::string_view what) : what_(what) {
  Via via = Via::buffer_protocol;
  std::tie(owner_, via) = exporter_of(object);
  if (via == Via::dlpack && access == Access::write) {
    throw BadArgument{what_ +
                      " is written, and a DLPack exporter's memory is read-only here "
                      "(numpy.from_dlpack's view): pass a numpy array or a torch tensor"};
  }
  if (PyObject_CheckBuffer(owner_.ptr()) == 0) {
    throw BadArgument{what_ +
                      " must support the buffer protocol (a numpy array, bytearray, "
                      "memoryview) or be a CPU tensor; got " +
                      std::string(py::str(py::type::of(object).attr("__name__")))};
  }
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT;
  if (access == Access::write) flags |= PyBUF_WRITABLE;
  if (PyObject_GetBuffer(owner_.ptr(), &view_, flags) != 0) {
    py::error_already_set why;
    throw BadArgument{what_ + " must be a " +
                      (access == Access::write ? std::string("writable ") : std::string()) +
                      "C-contiguous buffer: " + why.what()};
  }
  if (via == Via::numpy_view && view_.len > 0 &&
      py::cast<std::uintptr_t>(object.attr("data_ptr")()) !=
          reinterpret_cast<std::uintptr_t>(view_.buf)) {
    throw BadArgument{what_ +
                      ": its .numpy() is not a view of its own memory, so rlx cannot "
                      "use it in place"};
  }
}

Buffer::~Buffer() {
  if (view_.obj != nullptr) PyBuffer_Release(&view_);
}

ElementSpan Buffer::elements(std::optional<Dtype> dtype) const {
  const auto itemsize = static_cast<std::size_t>(view_.itemsize);
  const char* format = view_.format != nullptr ? view_.format : "B";
  if (!dtype) {
    dtype = dtype_of_format(format, itemsize);
    if (!dtype) {
      throw BadArgument{what_ + " has elements of format '" + format + "' (" +
                        std::to_string(itemsize) +
                        " bytes), which rlx has no dtype for: float32, float64, float16, int32, "
                        "int64, uint8 or bool (bfloat16: a 2-byte buffer with dtype=\"bf16\")"};
    }
  } else if (const auto own = dtype_of_format(format, itemsize); own && *own != *dtype) {
    throw BadArgument{what_ + " holds " + std::string(name_of(*own)) + " elements, not " +
                      std::string(name_of(*dtype)) +
                      " (dtype= names what a buffer of bytes or 16-bit integers holds, such as "
                      "bf16; it does not convert)"};
  } else if (bytes() % size_of(*dtype) != 0) {
    throw BadArgument{what_ + " holds " + std::to_string(bytes()) +
                      " bytes, not a whole number of " + std::string(name_of(*dtype)) +
                      " elements"};
  }
  return {view_.buf, bytes() / size_of(*dtype), *dtype};
}

}  // namespace rlx::python
