#include "transport/log.h"

#include <string>

#include <unistd.h>

namespace rlx {

void log_warning(std::string_view message) {
  std::string line = "rlx warning: ";
  line += message;
  line += '\n';
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace rlx
