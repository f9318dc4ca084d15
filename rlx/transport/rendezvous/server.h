// The rendezvous server a launcher runs for its job: it collects every rank's
// registration and, once all are in, sends each rank the table of endpoints.
// Strangers, wrong tokens, duplicates and silent connections are logged once
// and dropped; the job goes on.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rlx/transport/endpoint.h"

namespace rlx::rendezvous {

class Server {
 public:
  // Listens on `bind_host` (an address of this machine, or 0.0.0.0 / ::
  // for every one), on `port` (0: an ephemeral one). Throws
  // std::runtime_error if it cannot listen.
  Server(int world_size, std::string token, const std::string& bind_host, std::uint16_t port = 0);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // What ranks connect to: the value of RLX_COORDINATOR.
  HostPort address() const { return address_; }
  int registered() const { return registered_.load(); }
  bool complete() const { return registered() == world_size_; }
  // The job token registrations are checked against.
  const std::string& token() const;
  // Ranks that have not registered yet, in order.
  std::vector<int> missing() const;
  // The endpoints registered so far, by rank (empty host: not yet).
  std::vector<HostPort> endpoints() const;

 private:
  struct Impl;
  const int world_size_;
  HostPort address_;
  std::atomic<int> registered_{0};
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlx::rendezvous
