// Connection setup over rdma_cm (so the same code runs on InfiniBand, RoCE
// and iWARP), authenticated with the TCP transport's handshake
// (rlx/transport/handshake.h) carried in rdma_cm's private data and the first
// SENDs on the new queue pair:
//
//   connector: rdma_connect   private data = Hello      (who, whom, nonce_c)
//   acceptor:  rdma_accept    private data = Challenge  (nonce_a, acceptor MAC)
//   connector: SEND           Response MAC | connector's ring
//   acceptor:  SEND           Welcome | acceptor's ring
//
// The higher rank connects; every rank listens. Hellos that make no sense are
// rejected before a queue pair exists; a wrong Response gets the connection
// torn down. Either way it is logged once and the job goes on. A peer learns
// where to RDMA-write (its ring's address and key) only after the token proof.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rlx/backends/verbs/queue_pair.h"
#include "rlx/backends/verbs/registered_memory.h"
#include "rlx/transport/endpoint.h"
#include "rlx/transport/socket_io.h"

struct rdma_event_channel;
struct rdma_cm_id;
struct ibv_context;

namespace rlx::verbs {

// Where a peer may RDMA-write: its ring for us, and the layout both sides must share.
struct RingInfo {
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint32_t slot_bytes = 0;
  std::uint16_t slots[2] = {0, 0};  // per stream
  std::uint32_t recv_credits = 0;   // receive buffers the reader pre-posts for data

  friend bool operator==(const RingInfo&, const RingInfo&) = default;
};

// An authenticated connection, ready for data.
struct PeerLink {
  int peer = -1;
  ibv_qp* qp = nullptr;
  QueueShape shape;
  RingInfo remote;
};

class ConnectionManager {
 public:
  struct Hooks {
    std::function<RingInfo(int peer)> local_ring;             // what `peer` may write to
    std::function<void(int peer, ibv_qp* qp)> post_receives;  // before `peer` may send data
    std::function<void(const PeerLink&)> ready;
    std::function<void(int peer, const std::string& why)> lost;  // a ready connection dropped
  };

  // Creates the event channel and listens on `address` (any port). Throws CollectiveError.
  ConnectionManager(int rank, int world_size, std::string token, const std::string& address);
  ~ConnectionManager();
  ConnectionManager(const ConnectionManager&) = delete;
  ConnectionManager& operator=(const ConnectionManager&) = delete;

  // The device the listening address selected (null when it selects none).
  ibv_context* context() const;
  std::uint16_t port() const;
  const std::string& address() const { return address_; }
  int event_fd() const;

  // Once the device's PD and CQ exist: handshake buffers, queue shape, hooks.
  void attach(ibv_pd* pd, ibv_cq* cq, QueueShape shape, Hooks hooks);
  // Starts connecting to every lower rank at its `table` entry.
  void start_connecting(const std::vector<HostPort>& table);
  // Handles pending rdma_cm events and expired handshakes; never blocks.
  // Throws CollectiveError for a failure that ends the setup.
  void handle_events();
  // A completion of a handshake work request.
  void on_completion(const ibv_wc& wc);
  bool mesh_complete() const { return ready_count_ == world_size_ - 1; }
  // "ranks 2, 3 (last error: ...)": who is not connected yet.
  std::string missing() const;
  // Disconnects and destroys every queue pair and connection (at shutdown).
  void destroy_connections();
  // Deregisters the handshake buffers (before the protection domain goes).
  void release_memory() { handshake_memory_.reset(); }

 private:
  struct Session;
  using SessionPtr = std::unique_ptr<Session>;

  void dispatch(int type, rdma_cm_id* id, int status, const std::vector<std::byte>& data);
  void on_device_removed();
  void on_address_resolved(Session& session, rdma_cm_id* id);
  void on_route_resolved(Session& session, rdma_cm_id* id);
  void on_connect_request(rdma_cm_id* id, const std::vector<std::byte>& data);
  void on_established(Session& s, const std::vector<std::byte>& data);
  void on_response(Session& s, std::uint32_t bytes);
  void on_welcome(Session& s, std::uint32_t bytes);
  void connect(int peer);
  void retry_later(Session& s, const std::string& why);
  void drop(Session& s, const std::string& why);
  void destroy(Session& s);
  void check_timers();
  Session* session_of(rdma_cm_id* id);
  std::byte* slot_recv(const Session& s) const;
  std::byte* slot_send(const Session& s) const;
  ErrorSite site(std::string operation, int peer = -1) const;

  int rank_, world_size_;
  std::string token_;
  std::string address_;
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  QueueShape shape_;
  Hooks hooks_;
  std::unique_ptr<RegisteredMemory> handshake_memory_;
  std::vector<int> free_slots_;
  std::vector<HostPort> table_;
  std::map<std::uint32_t, SessionPtr> sessions_;  // by id (rdma_cm_id context)
  std::vector<rdma_cm_id*> doomed_;               // destroyed once their event is acked
  std::uint32_t next_session_ = 1;
  int ready_count_ = 0;
  std::vector<bool> peer_ready_;
  std::vector<std::string> last_error_;  // per lower peer
};

}  // namespace rlx::verbs
