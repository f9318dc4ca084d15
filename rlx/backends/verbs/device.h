// Which RDMA device, port and GID a rank uses, and the verbs objects that
// hang off that device (protection domain, completion queue and channel).
//
// With rdma_cm an IP address selects the device, port and GID, so the choice
// is made as an address: RLX_IFNAME's, else the one that reaches the
// coordinator (what the rendezvous sees). When that address has no RDMA device
// behind it (loopback, a plain NIC), the first active port's address is used.
// RLX_IB_DEVICE, RLX_IB_PORT and RLX_IB_GID_INDEX override the automatic
// choice: the address is then read from that port's GID table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rlx/transport/errors.h"
#include "rlx/transport/launch_env.h"

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_comp_channel;

namespace rlx::verbs {

// The device choice comes from the settings (RLX_IB_DEVICE, RLX_IB_PORT,
// RLX_IB_GID_INDEX), parsed with the rest of the launch environment.
using DeviceSettings = launch_env::VerbsSettings;

// The IP address a GID stands for when it embeds one (RoCE: IPv4-mapped or a
// global IPv6 address); nullopt for link-local and InfiniBand GIDs.
// `gid` is the text of a sysfs gids/N file ("0000:...:ffff:c0a8:4d01").
std::optional<std::string> address_in_gid(const std::string& gid);

// The address of an RDMA port chosen by `settings` (or automatically: the
// first active port, preferring RoCE v2 IPv4 GIDs), read under `sysfs_root`
// (normally /sys/class/infiniband). Throws CollectiveError
// (backend_unavailable) naming the devices found and what is missing.
std::string rdma_port_address(const DeviceSettings& settings, const ErrorSite& site,
                              const std::string& sysfs_root = "/sys/class/infiniband");

// True for addresses no RDMA device can serve (loopback, unspecified).
bool is_loopback_address(const std::string& address);

// The protection domain, completion channel and completion queue of the
// device a bound rdma_cm id selected. Every queue pair shares the one CQ.
class Device {
 public:
  Device(ibv_context* context, int cq_entries, const ErrorSite& site);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  ibv_cq* cq() const { return cq_; }
  ibv_comp_channel* channel() const { return channel_; }
  std::string name() const;

 private:
  void release();

  ibv_context* context_;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
};

// "rdma0" for a context.
std::string device_name(ibv_context* context);

}  // namespace rlx::verbs
