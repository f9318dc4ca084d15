// The array runtime in one include: lazy arrays, their ops and evaluation,
// custom ops, and graphs.
#pragma once

#include "rlx/core/array.h"           // IWYU pragma: export
#include "rlx/core/compiled_graph.h"  // IWYU pragma: export
#include "rlx/core/custom.h"          // IWYU pragma: export
#include "rlx/core/eval.h"            // IWYU pragma: export
#include "rlx/core/graph.h"           // IWYU pragma: export
#include "rlx/core/ops.h"             // IWYU pragma: export
#include "rlx/core/registry.h"        // IWYU pragma: export
