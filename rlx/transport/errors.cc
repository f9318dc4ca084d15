#include "rlx/transport/errors.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <sys/resource.h>

namespace rlx {
namespace {

std::string format_message(ErrorKind kind, const ErrorSite& site, std::string_view detail,
                           std::string_view hint) {
  std::string text = "rlx";
  if (site.rank >= 0) {
    text += " rank " + std::to_string(site.rank);
    if (site.world_size > 0) text += " of " + std::to_string(site.world_size);
  }
  if (!site.operation.empty()) text += ": " + site.operation;
  if (!site.sizes.empty()) text += " (" + site.sizes + ")";
  if (site.peer >= 0) text += " with peer rank " + std::to_string(site.peer);
  text += ": ";
  text += name_of(kind);
  text += ": ";
  text += detail;
  if (!hint.empty()) {
    text += ". Check: ";
    text += hint;
  }
  return text;
}

}  // namespace

std::string_view name_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::timeout:
      return "timeout";
    case ErrorKind::peer_lost:
      return "peer lost";
    case ErrorKind::protocol_violation:
      return "protocol violation";
    case ErrorKind::mismatch:
      return "collective mismatch";
    case ErrorKind::invalid_argument:
      return "invalid argument";
    case ErrorKind::backend_unavailable:
      return "backend unavailable";
    case ErrorKind::resource_exhausted:
      return "resource exhausted";
  }
  return "error";
}

std::string_view id_of(ErrorKind kind) {
  static constexpr std::string_view kIds[] = {
      "timeout",          "peer_lost",           "protocol_violation", "mismatch",
      "invalid_argument", "backend_unavailable", "resource_exhausted"};
  const auto index = static_cast<std::size_t>(kind);
  return index < std::size(kIds) ? kIds[index] : "error";
}

CollectiveError::CollectiveError(ErrorKind kind, ErrorSite site, std::string_view detail,
                                 std::string_view hint)
    : Error(format_message(kind, site, detail, hint)),
      kind_(kind),
      site_(std::move(site)),
      detail_(detail),
      hint_(hint) {}

CollectiveError CollectiveError::seen_from(ErrorSite site) const {
  // The peer the failure is blamed on, not the one this call waited for.
  if (site_.peer >= 0 || site.peer < 0) site.peer = site_.peer;
  return CollectiveError(kind_, std::move(site), detail_, hint_);
}

CollectiveError peer_shut_down(ErrorSite site, int peer, std::string_view what) {
  const std::string rank = "rank " + std::to_string(peer);
  return CollectiveError(ErrorKind::peer_lost, std::move(site),
                         rank + " has shut down its transport" + std::string(what),
                         "did " + rank + " close its group or return from main early?");
}

std::string format_bytes(std::size_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 6) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value == static_cast<double>(static_cast<std::size_t>(value))) {
    std::snprintf(text, sizeof text, "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

bool is_out_of_descriptors(int error_number) {
  return error_number == EMFILE || error_number == ENFILE;
}

CollectiveError out_of_descriptors(ErrorSite site, std::string_view what, int error_number) {
  std::string limit = "the system's limit (fs.file-max)";
  if (rlimit files{}; error_number == EMFILE && ::getrlimit(RLIMIT_NOFILE, &files) == 0) {
    limit = "this process's limit of " +
            (files.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                             : std::to_string(files.rlim_cur)) +
            " open files (ulimit -n)";
  }
  return CollectiveError(ErrorKind::resource_exhausted, std::move(site),
                         "cannot create " + std::string(what) + ": " + std::strerror(error_number) +
                             ": " + limit + " is reached",
                         "raise it (ulimit -n, prlimit, LimitNOFILE= for a service), or hold "
                         "fewer groups or connections at once: a TCP group holds 1 + "
                         "RLX_TCP_LANES connections to each of its other ranks, and a few "
                         "descriptors of its own");
}

std::string excerpt(std::string_view text, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < text.size() && i < limit; ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte != 0x7f) {
      out += static_cast<char>(byte);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    }
  }
  if (text.size() > limit) out += "... (" + format_bytes(text.size()) + " in all)";
  return out;
}

std::string describe_elements(std::size_t count, Dtype dtype) {
  return std::to_string(count) + " x " + std::string(name_of(dtype)) + " (" +
         format_bytes(count * size_of(dtype)) + ")";
}

}  // namespace rlx
