// The table behind the collective ops' group ids: what array_collectives.cc
// and array_point_to_point.cc share.
#pragma once

#include <memory>
#include <string_view>

#include "rlx/transport/transport.h"

namespace rlx::distributed {

// The group with id `id`; throws rlx::Error naming `op` when there is none
// (id 0 before rlx::init set the default group).
std::shared_ptr<Transport> group_at(int id, std::string_view op);

}  // namespace rlx::distributed
