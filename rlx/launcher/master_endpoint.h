// MASTER_ADDR and MASTER_PORT for the ranks rlxrun starts: where
// torch.distributed's env:// rendezvous (a TCPStore on rank 0) and other
// frameworks that read torchrun's variables meet.
#pragma once

#include <string>

#include "rlx/launcher/hostfile.h"

namespace rlx::launcher {

struct MasterEndpoint {
  std::string address;
  std::string port;
};

// Rank 0's host as the others reach it (the hostfile's address for it, or
// `rendezvous_address` when rank 0 runs on this machine), and a port free
// there: one this machine picks when rank 0 runs here, else torchrun's
// default, 29500.
MasterEndpoint master_endpoint(const Placement& rank0, const std::string& rendezvous_address);

}  // namespace rlx::launcher
