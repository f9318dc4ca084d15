#include "rlx/backends/verbs/device.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>

#include "rlx/transport/endpoint.h"

namespace rlx::verbs {
namespace {

namespace fs = std::filesystem;

std::string read_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool port_is_active(const fs::path& port) {
  return read_line(port / "state").find("ACTIVE") != std::string::npos;
}

std::vector<std::string> sorted_entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The address behind GID `index` of `port`: the one the GID embeds, else its netdev's.
std::optional<std::string> gid_address(const fs::path& port, int index) {
  const std::string gid = read_line(port / "gids" / std::to_string(index));
  if (gid.empty()) return std::nullopt;
  if (auto address = address_in_gid(gid)) return address;
  const std::string netdev = read_line(port / "gid_attrs" / "ndevs" / std::to_string(index));
  if (netdev.empty()) return std::nullopt;
  try {
    return interface_address(netdev);
  } catch (const CollectiveError&) {
    return std::nullopt;
  }
}

// The GID index to use on `port`: a RoCE v2 IPv4 GID first, then any with an address.
std::optional<std::pair<int, std::string>> best_gid(const fs::path& port) {
  std::optional<std::pair<int, std::string>> fallback;
  for (const auto& name : sorted_entries(port / "gids")) {
    int index = 0;
    if (std::from_chars(name.data(), name.data() + name.size(), index).ec != std::errc()) continue;
    auto address = gid_address(port, index);
    if (!address) continue;
    const std::string type = read_line(port / "gid_attrs" / "types" / name);
    if (type.find("v2") != std::string::npos && address->find(':') == std::string::npos) {
      return std::make_pair(index, *address);
    }
    if (!fallback) fallback = std::make_pair(index, *address);
  }
  return fallback;
}

}  // namespace

std::optional<std::string> address_in_gid(const std::string& gid) {
  std::string hex;
  for (char c : gid) {
    if (c != ':') hex += c;
  }
  if (hex.size() != 32) return std::nullopt;
  unsigned char bytes[16];
  for (int i = 0; i < 16; ++i) {
    unsigned value = 0;
    const char* begin = hex.data() + 2 * i;
    if (std::from_chars(begin, begin + 2, value, 16).ec != std::errc()) return std::nullopt;
    bytes[i] = static_cast<unsigned char>(value);
  }
  char text[INET6_ADDRSTRLEN] = {};
  static constexpr unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(bytes, kMapped, 12) == 0) {
    ::inet_ntop(AF_INET, bytes + 12, text, sizeof text);
    return std::string(text);
  }
  const bool zero = std::all_of(bytes, bytes + 16, [](unsigned char b) { return b == 0; });
  const bool link_local = bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80;
  if (zero || link_local) return std::nullopt;  // InfiniBand GIDs are link-local (fe80::guid)
  ::inet_ntop(AF_INET6, bytes, text, sizeof text);
  return std::string(text);
}

std::string rdma_port_address(const DeviceSettings& settings, const ErrorSite& site,
                              const std::string& sysfs_root) {
  const auto devices = sorted_entries(sysfs_root);
  std::string found;
  for (const auto& d : devices) found += (found.empty() ? "" : ", ") + d;
  if (found.empty()) found = "none";
  auto unavailable = [&](const std::string& detail) -> CollectiveError {
    return CollectiveError(ErrorKind::backend_unavailable, site,
                           detail + " (RDMA devices here: " + found + ")",
                           "check `ibv_devices` / `rdma link`; set RLX_IFNAME to an interface "
                           "with an RDMA device, or RLX_IB_DEVICE / RLX_IB_PORT / "
                           "RLX_IB_GID_INDEX");
  };
  if (!settings.device.empty() &&
      std::find(devices.begin(), devices.end(), settings.device) == devices.end()) {
    throw unavailable("RLX_IB_DEVICE=" + settings.device + " does not exist");
  }
  for (const auto& device : devices) {
    if (!settings.device.empty() && device != settings.device) continue;
    const fs::path ports = fs::path(sysfs_root) / device / "ports";
    for (const auto& port_name : sorted_entries(ports)) {
      if (settings.port != 0 && port_name != std::to_string(settings.port)) continue;
      const fs::path port = ports / port_name;
      if (!port_is_active(port)) {
        if (settings.port != 0) {
          throw unavailable(device + " port " + port_name + " is not active");
        }
        continue;
      }
      if (settings.gid_index) {
        if (auto address = gid_address(port, *settings.gid_index)) return *address;
        throw unavailable(device + " port " + port_name + " GID index " +
                          std::to_string(*settings.gid_index) + " has no IP address");
      }
      if (auto best = best_gid(port)) return best->second;
    }
  }
  throw unavailable(
      settings.device.empty()
          ? std::string("no active RDMA port with an IP address")
          : "RLX_IB_DEVICE=" + settings.device + " has no active port with an IP address" +
                (settings.port != 0 ? " on port " + std::to_string(settings.port) : std::string()));
}

bool is_loopback_address(const std::string& address) {
  return address.empty() || address.starts_with("127.") || address == "::1" ||
         address == "0.0.0.0" || address == "::" || address == "localhost";
}

std::string device_name(ibv_context* context) {
  return context != nullptr ? ibv_get_device_name(context->device) : "(none)";
}

Device::Device(ibv_context* context, int cq_entries, const ErrorSite& site) : context_(context) {
  auto fail = [&](const std::string& what) {
    const int code = errno;
    release();
    throw CollectiveError(ErrorKind::backend_unavailable, site,
                          what + " on " + device_name(context) + " failed: " + std::strerror(code));
  };
  pd_ = ibv_alloc_pd(context_);
  if (pd_ == nullptr) fail("ibv_alloc_pd");
  channel_ = ibv_create_comp_channel(context_);
  if (channel_ == nullptr) fail("ibv_create_comp_channel");
  // Non-blocking: the progress thread poll()s it with a timeout, never blocks in it.
  const int flags = ::fcntl(channel_->fd, F_GETFL);
  if (::fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("fcntl(O_NONBLOCK)");
  ibv_device_attr attr{};
  if (ibv_query_device(context_, &attr) == 0 && attr.max_cqe > 0) {
    cq_entries = std::min(cq_entries, attr.max_cqe);
  }
  cq_ = ibv_create_cq(context_, cq_entries, nullptr, channel_, 0);
  if (cq_ == nullptr) fail("ibv_create_cq(" + std::to_string(cq_entries) + " entries)");
}

Device::~Device() { release(); }

void Device::release() {
  if (cq_ != nullptr) ibv_destroy_cq(cq_);
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  cq_ = nullptr;
  channel_ = nullptr;
  pd_ = nullptr;
}

std::string Device::name() const { return device_name(context_); }

}  // namespace rlx::verbs
