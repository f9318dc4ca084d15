// The root of every exception rlx throws. Catching rlx::Error catches them all;
// the transport layer refines it (rlx/transport/errors.h).
#pragma once

#include <stdexcept>

namespace rlx {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace rlx
