// rlx's errors as Python exceptions: rlx.Error (a RuntimeError) and one
// subclass per ErrorKind, each also under the builtin that a Python
// programmer would catch (rlx.TimeoutError is a TimeoutError,
// rlx.PeerLostError a ConnectionError, rlx.InvalidArgumentError a
// ValueError, rlx.ResourceExhaustedError a MemoryError). Every exception
// carries `kind` (the ErrorKind's name) and `peer` (the rank it blames, or
// None).
#pragma once

#include <pybind11/pybind11.h>

namespace rlx::python {

// Adds the exception classes to `module` and translates every C++ exception
// that escapes a binding into one of them.
void define_errors(pybind11::module_& module);

// Raised for arguments only the binding can check (buffers, dtypes, ops).
struct BadArgument {
  std::string text;
};

}  // namespace rlx::python
