#include "backends/tcp/static_hostfile.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "transport/errors.h"

namespace rlx::tcp {
namespace {

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw CollectiveError(ErrorKind::invalid_argument, {.operation = "read RLX_HOSTFILE"},
                        origin + ": " + what,
                        "the file is a JSON list with one entry per rank: \"host:port\", "
                        "[\"host:port\", ...] or {\"host\": ..., \"port\": ...}");
}

HostPort entry_endpoint(const nlohmann::json& entry, const std::string& where) {
  if (entry.is_string()) return parse_host_port(entry.get<std::string>(), where);
  if (entry.is_array() && !entry.empty() && entry[0].is_string()) {
    return parse_host_port(entry[0].get<std::string>(), where);
  }
  if (entry.is_object() && entry.contains("host") && entry["host"].is_string() &&
      entry.contains("port") && entry["port"].is_number_unsigned()) {
    const auto port = entry["port"].get<unsigned long long>();
    if (port == 0 || port > 65535) bad(where, "port " + std::to_string(port) + " is out of range");
    return {entry["host"].get<std::string>(), static_cast<std::uint16_t>(port)};
  }
  bad(where,
      "expected \"host:port\", a list of them, or {\"host\", \"port\"}; found " + entry.dump());
}

}  // namespace

std::vector<HostPort> parse_static_table(const std::string& json_text, const std::string& origin) {
  const auto doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) bad(origin, "is not valid JSON");
  if (!doc.is_array() || doc.empty()) bad(origin, "must be a non-empty JSON list");
  std::vector<HostPort> table;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    table.push_back(entry_endpoint(doc[i], origin + " entry " + std::to_string(i)));
  }
  return table;
}

std::vector<HostPort> read_static_table(const std::string& path) {
  std::ifstream file(path);
  if (!file) bad(path, "cannot be read");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_static_table(text.str(), path);
}

}  // namespace rlx::tcp
