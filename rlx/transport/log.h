// What rlx tells a person while it runs, on stderr, one write() per line so
// lines from threads and ranks do not interleave. RLX_LOG sets how much:
//   warn  (default)  what must reach a person but must not stop the job:
//                    a stranger on our port, a rejected handshake;
//   info             once per job: the backend, the group, each peer's path;
//   debug            connection setup step by step, and every collective's
//                    algorithm with the reason it was chosen.
// Each line names the rank: "rlx[3] debug: all_reduce sum of ...: ring ...".
#pragma once

#include <atomic>
#include <cstdint>
#include <string_view>

namespace rlx {

enum class LogLevel : std::uint8_t { debug = 0, info = 1, warn = 2 };

// Sets the threshold and the rank every line names (-1 before it is known).
// rlx::init calls it with the settings; until then only warnings print.
void configure_log(LogLevel threshold, int rank);

namespace log_detail {
inline std::atomic<std::uint8_t> threshold{static_cast<std::uint8_t>(LogLevel::warn)};
}  // namespace log_detail

// One relaxed load: cheap enough to guard a line on a collective's hot path.
inline bool log_enabled(LogLevel level) {
  return static_cast<std::uint8_t>(level) >= log_detail::threshold.load(std::memory_order_relaxed);
}

// Prints `message` when `level` is enabled.
void log(LogLevel level, std::string_view message);

inline void log_warning(std::string_view message) { log(LogLevel::warn, message); }

// Builds the line only when it prints: log_lazily(LogLevel::debug, [&] { return ...; }).
template <class MakeMessage>
void log_lazily(LogLevel level, MakeMessage&& make_message) {
  if (log_enabled(level)) log(level, make_message());
}

}  // namespace rlx
