// Warnings that must reach a person but must not stop the job (a stranger on
// our port, a rejected handshake). One write() per line, so lines from
// threads and ranks do not interleave.
#pragma once

#include <string_view>

namespace rlx {

void log_warning(std::string_view message);

}  // namespace rlx
