// The Python module `rlx` (the README's Python section says how to use it).
#include <pybind11/pybind11.h>

#include "bindings/python/errors.h"
#include "bindings/python/group.h"
#include "rlx/version.h"

PYBIND11_MODULE(rlx, module) {
  module.doc() =
      "rlx: collectives and point-to-point between the processes of a job. "
      "rlx.init() returns this process's Group; buffers (numpy arrays, bytearray, "
      "CPU tensors) are used in place.";
  module.attr("__version__") = RLX_VERSION_STRING;
  rlx::python::define_errors(module);
  rlx::python::define_group(module);
}
