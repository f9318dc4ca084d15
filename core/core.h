// The array runtime in one include: lazy arrays, their ops and evaluation,
// custom ops, and graphs.
#pragma once

#include "core/array.h"           // IWYU pragma: export
#include "core/compiled_graph.h"  // IWYU pragma: export
#include "core/custom.h"          // IWYU pragma: export
#include "core/eval.h"            // IWYU pragma: export
#include "core/graph.h"           // IWYU pragma: export
#include "core/ops.h"             // IWYU pragma: export
#include "core/registry.h"        // IWYU pragma: export
