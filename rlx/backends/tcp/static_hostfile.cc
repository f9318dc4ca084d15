#include "rlx/backends/tcp/static_hostfile.h"

#include <nlohmann/json.hpp>

#include "rlx/transport/errors.h"
#include "rlx/transport/hostfile_reader.h"

namespace rlx::tcp {
namespace {

// `what` starts with the file's name (and the entry's number).
[[noreturn]] void bad(std::string_view variable, const std::string& what) {
  throw CollectiveError(ErrorKind::invalid_argument, {.operation = "read " + std::string(variable)},
                        what,
                        "the file is a JSON list with one entry per rank: \"host:port\", "
                        "[\"host:port\", ...] or {\"host\": ..., \"port\": ...}");
}

HostPort entry_endpoint(const nlohmann::json& entry, std::string_view variable,
                        const std::string& where) {
  const std::string parsing = std::string(variable) + " " + where;
  if (entry.is_string()) return parse_host_port(entry.get<std::string>(), parsing);
  if (entry.is_array() && !entry.empty() && entry[0].is_string()) {
    return parse_host_port(entry[0].get<std::string>(), parsing);
  }
  if (entry.is_object() && entry.contains("host") && entry["host"].is_string() &&
      entry.contains("port") && entry["port"].is_number_unsigned()) {
    const auto port = entry["port"].get<unsigned long long>();
    if (port == 0 || port > 65535) {
      bad(variable, where + ": port " + std::to_string(port) + " is out of range");
    }
    return {entry["host"].get<std::string>(), static_cast<std::uint16_t>(port)};
  }
  bad(variable, where +
                    ": expected \"host:port\", a list of them, or {\"host\", \"port\"}; found " +
                    hostfile::excerpt(entry));
}

// Host names are at most 255 bytes (DNS); a longer one is not a host.
HostPort checked_endpoint(const nlohmann::json& entry, std::string_view variable,
                          const std::string& where) {
  HostPort endpoint = entry_endpoint(entry, variable, where);
  constexpr std::size_t kMaxHost = 255;
  if (endpoint.host.empty() || endpoint.host.size() > kMaxHost) {
    bad(variable,
        where + ": host '" + excerpt(endpoint.host) + "' is not a host name (1 to 255 bytes)");
  }
  return endpoint;
}

}  // namespace

std::string_view hostfile_variable(const launch_env::LaunchEnv& env) {
  return env.group_source == launch_env::GroupSource::mlx ? launch_env::kMlxHostfile
                                                          : launch_env::kHostfile;
}

std::vector<HostPort> parse_static_table(std::string_view json_text, const std::string& origin,
                                         std::string_view variable) {
  nlohmann::json doc;
  try {
    doc = hostfile::parse_json(json_text, origin);
  } catch (const hostfile::ReadError& error) {
    bad(variable, error.what());
  }
  if (!doc.is_array() || doc.empty()) bad(variable, origin + ": must be a non-empty JSON list");
  std::vector<HostPort> table;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    table.push_back(checked_endpoint(doc[i], variable, origin + " entry " + std::to_string(i)));
  }
  return table;
}

std::vector<HostPort> read_static_table(const launch_env::LaunchEnv& env) {
  const std::string_view variable = hostfile_variable(env);
  std::string text;
  try {
    text = hostfile::read_text(env.hostfile, env.connect_timeout);
  } catch (const hostfile::ReadError& error) {
    bad(variable, error.what());
  }
  return parse_static_table(text, env.hostfile, variable);
}

}  // namespace rlx::tcp
