#include "bindings/python/errors.h"

#include <new>
#include <string>

#include "rlx/transport/errors.h"

namespace py = pybind11;

namespace rlx::python {
namespace {

struct ErrorClasses {
  py::object base;
  py::object by_kind[7];
};

ErrorClasses& classes() {
  static ErrorClasses* held = new ErrorClasses();  // lives as long as the interpreter's module
  return *held;
}

py::object new_class(py::module_& module, const char* name, py::tuple bases, const char* doc) {
  const std::string qualified = std::string("rlx.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  auto object = py::reinterpret_steal<py::object>(type);
  module.attr(name) = object;
  return object;
}

// ErrorKind's names as identifiers (the C API's rlx_status_name spells them so).
void raise(ErrorKind kind, const std::string& text, int peer) {
  const py::object& type = classes().by_kind[static_cast<int>(kind)];
  py::object error = type(text);
  error.attr("kind") = std::string(id_of(kind));
  error.attr("peer") = peer >= 0 ? py::object(py::int_(peer)) : py::none();
  PyErr_SetObject(type.ptr(), error.ptr());
}

void translate(std::exception_ptr pointer) {
  try {
    std::rethrow_exception(pointer);
  } catch (const CollectiveError& error) {
    raise(error.kind(), error.what(), error.peer());
  } catch (const BadArgument& bad) {
    raise(ErrorKind::invalid_argument, bad.text, -1);
  } catch (const std::bad_alloc&) {
    raise(ErrorKind::resource_exhausted, "out of memory", -1);
  } catch (const Error& error) {  // rlx's own, outside the transport: a bad argument
    raise(ErrorKind::invalid_argument, error.what(), -1);
  }
}

}  // namespace

void define_errors(py::module_& module) {
  ErrorClasses& c = classes();
  const py::object builtins = py::module_::import("builtins");
  c.base = new_class(module, "Error", py::make_tuple(builtins.attr("RuntimeError")),
                     "Every error rlx raises: `kind` names it, `peer` is the rank it blames "
                     "(or None).");
  struct Kind {
    ErrorKind kind;
    const char* name;
    const char* builtin;  // also a subclass of this builtin, or none
    const char* doc;
  };
  const Kind kinds[] = {
      {ErrorKind::timeout, "TimeoutError", "TimeoutError",
       "A deadline passed (RLX_TIMEOUT_S): a peer that never called, or a stopped network."},
      {ErrorKind::peer_lost, "PeerLostError", "ConnectionError",
       "A peer closed, reset or died; `peer` names it."},
      {ErrorKind::protocol_violation, "ProtocolViolationError", nullptr,
       "Bytes on the wire or in shared memory that the protocol does not allow."},
      {ErrorKind::mismatch, "MismatchError", nullptr,
       "Ranks called different collectives, or with different sizes, dtypes or roots."},
      {ErrorKind::invalid_argument, "InvalidArgumentError", "ValueError",
       "A bad call: a buffer, dtype, rank, root or setting that cannot be used."},
      {ErrorKind::backend_unavailable, "BackendUnavailableError", nullptr,
       "The transport asked for was not built or cannot start here."},
      {ErrorKind::resource_exhausted, "ResourceExhaustedError", "MemoryError",
       "A memory cap was reached (RLX_UNEXPECTED_BYTES), or memory ran out."},
  };
  for (const Kind& k : kinds) {
    const py::tuple bases = k.builtin != nullptr ? py::make_tuple(c.base, builtins.attr(k.builtin))
                                                 : py::make_tuple(c.base);
    c.by_kind[static_cast<int>(k.kind)] = new_class(module, k.name, bases, k.doc);
  }
  py::register_local_exception_translator(translate);
}

}  // namespace rlx::python
