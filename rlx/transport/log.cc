#include "rlx/transport/log.h"

#include <string>

#include <unistd.h>

namespace rlx {
namespace {

std::atomic<int> log_rank{-1};

std::string_view name_of(LogLevel level) {
  switch (level) {
    case LogLevel::debug:
      return "debug";
    case LogLevel::info:
      return "info";
    case LogLevel::warn:
      break;
  }
  return "warning";
}

}  // namespace

void configure_log(LogLevel threshold, int rank) {
  log_rank.store(rank, std::memory_order_relaxed);
  log_detail::threshold.store(static_cast<std::uint8_t>(threshold), std::memory_order_relaxed);
}

void log(LogLevel level, std::string_view message) {
  if (!log_enabled(level)) return;
  const int rank = log_rank.load(std::memory_order_relaxed);
  std::string line = rank >= 0 ? "rlx[" + std::to_string(rank) + "] " : std::string("rlx ");
  line += name_of(level);
  line += ": ";
  line += message;
  line += '\n';
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace rlx
