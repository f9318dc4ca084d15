#include "rlx/transport/tune_rules.h"

#include <algorithm>
#include <charconv>

#include "rlx/transport/errors.h"

namespace rlx::launch_env {
namespace {

constexpr std::size_t kMaxTuneLength = 4096;
constexpr const char* kSyntax =
    "RLX_TUNE must be entries separated by ';', each COLLECTIVE:RANGES with RANGES separated by "
    "',', each FROM-TO:ALGORITHM (bytes, FROM included, TO not; suffix k, m or g; TO may be inf) "
    "or ALGORITHM alone for every size, like all_gather:0-256k:recursive_doubling,256k-inf:ring";

[[noreturn]] void fail(std::string_view value, std::string_view part, std::string_view problem) {
  throw CollectiveError(ErrorKind::invalid_argument, {.operation = "read launch environment"},
                        "RLX_TUNE='" + excerpt(value) + "' is not valid: '" + excerpt(part) + "' " +
                            std::string(problem),
                        kSyntax);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) return parts;
    begin = end + 1;
  }
}

bool is_name(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

// "256k" -> 262144; "inf" -> kNoUpperBound when `may_be_infinite`.
bool parse_bytes(std::string_view text, bool may_be_infinite, std::uint64_t& bytes) {
  if (may_be_infinite && text == "inf") {
    bytes = kNoUpperBound;
    return true;
  }
  unsigned shift = 0;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K':
        shift = 10;
        break;
      case 'm':
      case 'M':
        shift = 20;
        break;
      case 'g':
      case 'G':
        shift = 30;
        break;
      default:
        break;
    }
  }
  if (shift != 0) text.remove_suffix(1);
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return false;
  if (value > (kNoUpperBound >> 1) >> shift) return false;
  bytes = value << shift;
  return true;
}

void parse_range(std::string_view value, std::string_view collective, std::string_view range,
                 std::vector<TuneRule>& rules) {
  TuneRule rule{.collective = std::string(collective)};
  const std::size_t colon = range.rfind(':');
  rule.algorithm = std::string(colon == std::string_view::npos ? range : range.substr(colon + 1));
  if (!is_name(rule.algorithm)) fail(value, range, "does not end in an algorithm's name");
  if (colon != std::string_view::npos) {
    const std::string_view sizes = range.substr(0, colon);
    const std::size_t dash = sizes.find('-');
    if (dash == std::string_view::npos ||
        !parse_bytes(sizes.substr(0, dash), false, rule.from_bytes) ||
        !parse_bytes(sizes.substr(dash + 1), true, rule.to_bytes)) {
      fail(value, range, "does not start with a size range FROM-TO");
    }
    if (rule.from_bytes >= rule.to_bytes) fail(value, range, "is an empty range (FROM >= TO)");
  }
  rule.text = std::string(collective) + ":" + std::string(range);
  for (const TuneRule& other : rules) {
    if (other.collective == rule.collective && other.from_bytes < rule.to_bytes &&
        rule.from_bytes < other.to_bytes) {
      fail(value, range, "overlaps " + other.text);
    }
  }
  rules.push_back(std::move(rule));
}

}  // namespace

std::vector<TuneRule> parse_tune(std::string_view text) {
  std::vector<TuneRule> rules;
  if (text.size() > kMaxTuneLength) {
    fail(text, text.substr(0, 40), "makes it longer than 4096 characters");
  }
  std::string entries(text);
  std::replace(entries.begin(), entries.end(), '#', ';');  // UCC's separator, free of shell quoting
  for (const std::string_view entry : split(entries, ';')) {
    if (entry.empty()) continue;  // "a;b;" and "" are fine
    const std::size_t colon = entry.find(':');
    const std::string_view collective = entry.substr(0, colon);
    if (colon == std::string_view::npos || !is_name(collective)) {
      fail(text, entry, "does not start with a collective's name and ':'");
    }
    for (const std::string_view range : split(entry.substr(colon + 1), ',')) {
      parse_range(text, collective, range, rules);
    }
  }
  return rules;
}

}  // namespace rlx::launch_env
