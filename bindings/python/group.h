// What Python holds: rlx.Group (every call of rlx::Group, taking buffers in
// place and releasing the GIL while it waits) and rlx.Request (a
// non-blocking call, holding its buffers until it completes).
#pragma once

#include <pybind11/pybind11.h>

namespace rlx::python {

void define_group(pybind11::module_& module);

}  // namespace rlx::python
