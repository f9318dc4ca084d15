#include "rlx/launcher/master_endpoint.h"

#include <cstdint>

#include "rlx/transport/endpoint.h"

namespace rlx::launcher {

MasterEndpoint master_endpoint(const Placement& rank0, const std::string& rendezvous_address) {
  constexpr std::uint16_t kTorchrunDefaultPort = 29500;
  if (!is_local_host(rank0.host)) {
    return {rank0.address.empty() ? rank0.host : rank0.address,
            std::to_string(kTorchrunDefaultPort)};
  }
  const std::string address = rank0.address.empty() ? rendezvous_address : rank0.address;
  return {address, std::to_string(unused_port(address).value_or(kTorchrunDefaultPort))};
}

}  // namespace rlx::launcher
