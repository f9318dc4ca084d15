#include "rlx/launcher/hostfile.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "rlx/transport/endpoint.h"
#include "rlx/transport/hostfile_reader.h"
#include "rlx/transport/launch_env.h"

namespace rlx::launcher {
namespace {

[[noreturn]] void fail(std::string_view origin, std::size_t line, const std::string& what) {
  throw HostfileError(std::string(origin) + (line > 0 ? ":" + std::to_string(line) : "") + ": " +
                      what);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<int> parse_count(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1 || value > 1 << 20) {
    return std::nullopt;
  }
  return value;
}

bool valid_host_name(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  for (char c : host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == ':' || c == '@';
    if (!ok) return false;
  }
  return true;
}

// One "key=value" word of an Open MPI line.
void apply_attribute(HostSlots& host, std::string_view word, std::string_view origin,
                     std::size_t line) {
  const auto eq = word.find('=');
  const std::string_view key = word.substr(0, eq);
  const bool is_slots = key == "slots";
  if (!is_slots && key != "max_slots" && key != "max-slots") {
    fail(origin, line,
         "unknown attribute '" + excerpt(word) +
             "': expected slots=N or max_slots=N after the host name");
  }
  const int value = eq == std::string_view::npos ? 0 : parse_count(word.substr(eq + 1)).value_or(0);
  if (value == 0) {
    fail(origin, line,
         "'" + excerpt(word) + "': expected " + excerpt(key) +
             "=N with N a whole number of at least 1");
  }
  if (is_slots) {
    host.slots = value;
  } else {
    host.max_slots = value;
  }
}

}  // namespace

std::vector<HostSlots> parse_openmpi_hostfile(std::string_view text, std::string_view origin) {
  std::vector<HostSlots> hosts;
  std::size_t line_number = 0;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    HostSlots host;
    std::size_t word_index = 0;
    std::istringstream words{std::string(line)};
    for (std::string word; words >> word; ++word_index) {
      if (word_index == 0) {
        if (!valid_host_name(word) || word.find('=') != std::string::npos) {
          fail(origin, line_number, "'" + excerpt(word) + "' is not a host name");
        }
        host.host = word;
      } else {
        apply_attribute(host, word, origin, line_number);
      }
    }
    if (host.max_slots && *host.max_slots < host.slots) {
      fail(origin, line_number,
           "max_slots=" + std::to_string(*host.max_slots) +
               " is below slots=" + std::to_string(host.slots));
    }
    hosts.push_back(host);
  }
  if (hosts.empty()) fail(origin, 0, "no hosts: expected lines like 'node1 slots=4'");
  return hosts;
}

std::vector<HostSlots> parse_host_list(std::string_view spec) {
  std::vector<HostSlots> hosts;
  for (std::size_t start = 0; start <= spec.size();) {
    const std::size_t end = std::min(spec.find(',', start), spec.size());
    const std::string_view item = trim(spec.substr(start, end - start));
    start = end + 1;
    HostSlots host;
    const auto colon = item.rfind(':');
    const bool has_count =
        colon != std::string_view::npos && item.find(']') == std::string_view::npos
            ? item.find(':') == colon
            : false;
    host.host = std::string(has_count ? item.substr(0, colon) : item);
    if (has_count) {
      const auto count = parse_count(item.substr(colon + 1));
      if (!count) fail("-H", 0, "'" + excerpt(item) + "': expected host:N with N >= 1");
      host.slots = *count;
    }
    if (!valid_host_name(host.host)) {
      fail("-H", 0, "'" + excerpt(item) + "': expected host or host:slots, comma-separated");
    }
    hosts.push_back(host);
  }
  return hosts;
}

namespace {

constexpr const char* kMlxForms =
    "a JSON list of hosts, like [{\"ssh\": \"node1\", \"ips\": [\"10.0.0.1\"]}, ...], or "
    "{\"hosts\": [...], \"envs\": [\"NAME=value\", ...]}";

HostSlots mlx_host(const nlohmann::json& entry, std::size_t i, std::string_view origin) {
  HostSlots host;
  if (entry.is_string()) {
    host.host = entry.get<std::string>();
  } else if (entry.is_object() && entry.contains("ssh") && entry["ssh"].is_string()) {
    host.host = entry["ssh"].get<std::string>();
    if (entry.contains("ips")) {
      const auto& ips = entry["ips"];
      if (!ips.is_array() || (!ips.empty() && !ips[0].is_string())) {
        fail(origin, 0,
             "entry " + std::to_string(i) + ": \"ips\" must be a list of addresses, found " +
                 hostfile::excerpt(ips));
      }
      if (!ips.empty()) host.address = ips[0].get<std::string>();
    }
  }
  if (!valid_host_name(host.host) || (!host.address.empty() && !valid_host_name(host.address))) {
    fail(origin, 0,
         "entry " + std::to_string(i) +
             ": expected \"host\" or {\"ssh\": \"host\", \"ips\": [...]}, found " +
             hostfile::excerpt(entry));
  }
  return host;
}

// "envs" reach every rank alike, as rlxrun's own settings do: no rank's
// place in the group (two ranks told RLX_RANK=0 are two groups of one), and
// every value checked by the ranks' own parser now, before any rank starts.
void check_envs(const std::vector<std::string>& envs, std::string_view origin) {
  for (const std::string& entry : envs) {
    const std::string name = entry.substr(0, entry.find('='));
    if (launch_env::is_per_rank_variable(name)) {
      fail(origin, 0,
           "\"envs\" sets " + name +
               ", which the launcher sets for each rank; \"envs\" apply to every rank alike "
               "(a host's address goes in its \"ips\")");
    }
  }
  try {
    launch_env::parse([&envs](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      const char* value = nullptr;  // the last entry wins, as when rlxrun sets them
      for (const std::string& entry : envs) {
        if (entry.starts_with(prefix)) value = entry.c_str() + prefix.size();
      }
      return value;
    });
  } catch (const CollectiveError& error) {
    fail(origin, 0, "\"envs\": " + error.detail() + ": " + error.hint());
  }
}

std::vector<std::string> mlx_envs(const nlohmann::json& doc, std::string_view origin) {
  std::vector<std::string> envs;
  if (!doc.contains("envs")) return envs;
  const auto& list = doc["envs"];
  if (!list.is_array()) fail(origin, 0, "\"envs\" must be a list of \"NAME=value\" strings");
  for (const auto& entry : list) {
    const std::string text = entry.is_string() ? entry.get<std::string>() : std::string();
    const auto eq = text.find('=');
    if (eq == 0 || eq == std::string::npos) {
      fail(origin, 0, "\"envs\" entry " + hostfile::excerpt(entry) + " is not \"NAME=value\"");
    }
    envs.push_back(text);
  }
  check_envs(envs, origin);
  return envs;
}

}  // namespace

HostList parse_mlx_hostfile(std::string_view text, std::string_view origin) {
  nlohmann::json doc;
  try {
    doc = hostfile::parse_json(text, origin);
  } catch (const hostfile::ReadError& error) {
    throw HostfileError(error.what() + std::string("; expected ") + kMlxForms);
  }
  const bool object = doc.is_object();
  const auto& hosts = object && doc.contains("hosts") ? doc["hosts"] : doc;
  if (!hosts.is_array() || hosts.empty()) fail(origin, 0, std::string("expected ") + kMlxForms);
  HostList list;
  for (std::size_t i = 0; i < hosts.size(); ++i)
    list.hosts.push_back(mlx_host(hosts[i], i, origin));
  if (object) list.envs = mlx_envs(doc, origin);
  return list;
}

HostList read_hostfile(const std::string& path, std::chrono::milliseconds connect_timeout) {
  std::string content;
  try {
    content = hostfile::read_text(path, connect_timeout);
  } catch (const hostfile::ReadError& error) {
    throw HostfileError(error.what());
  }
  const auto first = content.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (content[first] == '[' || content[first] == '{')) {
    return parse_mlx_hostfile(content, path);
  }
  return {parse_openmpi_hostfile(content, path), {}};
}

std::vector<Placement> place_ranks(const std::vector<HostSlots>& hosts, int ranks,
                                   bool oversubscribe, MapBy map_by) {
  std::vector<int> used(hosts.size(), 0);
  std::vector<std::size_t> host_of;
  long long capacity = 0;  // 4096 entries of 2^20 slots would overflow an int
  for (const HostSlots& host : hosts) capacity += host.slots;
  const int fitting = static_cast<int>(std::min<long long>(ranks, capacity));
  if (map_by == MapBy::node) {
    for (std::size_t h = 0; static_cast<int>(host_of.size()) < fitting;
         h = (h + 1) % hosts.size()) {
      if (used[h] >= hosts[h].slots) continue;
      host_of.push_back(h);
      ++used[h];
    }
  } else {
    for (std::size_t h = 0; h < hosts.size(); ++h) {
      for (int s = 0; s < hosts[h].slots && static_cast<int>(host_of.size()) < fitting; ++s) {
        host_of.push_back(h);
        ++used[h];
      }
    }
  }
  if (static_cast<int>(host_of.size()) < ranks && !oversubscribe) {
    throw HostfileError(std::to_string(ranks) + " ranks do not fit in " + std::to_string(capacity) +
                        " slots: give more hosts or slots, or pass --oversubscribe");
  }
  for (std::size_t h = 0; static_cast<int>(host_of.size()) < ranks; h = (h + 1) % hosts.size()) {
    bool any_room = false;
    for (std::size_t k = 0; k < hosts.size(); ++k) {
      any_room |= !hosts[k].max_slots || used[k] < *hosts[k].max_slots;
    }
    if (!any_room) {
      throw HostfileError(std::to_string(ranks) +
                          " ranks exceed the hosts' max_slots even with --oversubscribe");
    }
    if (hosts[h].max_slots && used[h] >= *hosts[h].max_slots) continue;
    host_of.push_back(h);
    ++used[h];
  }
  std::vector<Placement> out(static_cast<std::size_t>(ranks));
  std::vector<int> next_local(hosts.size(), 0);
  for (int r = 0; r < ranks; ++r) {
    const std::size_t h = host_of[static_cast<std::size_t>(r)];
    out[static_cast<std::size_t>(r)] = {hosts[h].host, next_local[h]++, used[h], hosts[h].address};
  }
  return out;
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || rlx::is_this_host(host)) return true;
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 && host == name;
}

}  // namespace rlx::launcher
