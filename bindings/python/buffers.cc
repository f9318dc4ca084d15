#include "bindings/python/buffers.h"

#include <string>

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

py::object exporter_of(const py::handle& object) {
  if (PyObject_CheckBuffer(object.ptr()) != 0) return py::reinterpret_borrow<py::object>(object);
  // A torch CPU tensor has no buffer protocol; .numpy() is a view of it, as
  // is numpy's view of any other DLPack exporter's CPU memory.
  py::object view = py::none();
  if (py::hasattr(object, "numpy")) {
    view = object.attr("numpy")();
  } else if (py::hasattr(object, "__dlpack__")) {
    view = py::module_::import("numpy").attr("from_dlpack")(object);
  }
  if (PyObject_CheckBuffer(view.ptr()) != 0) return view;
  return py::none();
}

}  // namespace

std::optional<Dtype> dtype_named(const py::object& name) {
  if (name.is_none()) return std::nullopt;
  // A numpy dtype or scalar type (np.float32) by its name.
  const std::string text =
      py::isinstance<py::str>(name)
          ? std::string(py::str(name))
          : std::string(py::str(py::module_::import("numpy").attr("dtype")(name).attr("name")));
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
  owner_ = exporter_of(object);
  if (owner_.is_none()) {
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
  } else if (bytes() % size_of(*dtype) != 0) {
    throw BadArgument{what_ + " holds " + std::to_string(bytes()) +
                      " bytes, not a whole number of " + std::string(name_of(*dtype)) +
                      " elements"};
  }
  return {view_.buf, bytes() / size_of(*dtype), *dtype};
}

}  // namespace rlx::python
