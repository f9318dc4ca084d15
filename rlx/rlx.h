// rlx: a distributed multi-process runtime with collectives.
//
// The one header users include:
//   #include <rlx/rlx.h>
//   rlx::Group group = rlx::init();    // the process group (size 1 without a launcher)
//   group->all_sum(std::span(values)); // in place, across every rank
//   rlx::Group pair = group.split(group.rank() / 2);  // ranks 0-1, 2-3, ...
#pragma once

#include "rlx/collectives/array_collectives.h"  // IWYU pragma: export
#include "rlx/core/core.h"                      // IWYU pragma: export
#include "rlx/core/dtype.h"                     // IWYU pragma: export
#include "rlx/core/error.h"                     // IWYU pragma: export
#include "rlx/core/half.h"                      // IWYU pragma: export
#include "rlx/group.h"                          // IWYU pragma: export
#include "rlx/init.h"                           // IWYU pragma: export
#include "rlx/transport/errors.h"               // IWYU pragma: export
#include "rlx/transport/transport.h"            // IWYU pragma: export
#include "rlx/version.h"                        // IWYU pragma: export
