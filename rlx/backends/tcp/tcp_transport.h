// The TCP ring transport: rlx's default.
//
// Between every pair of ranks: one point-to-point connection, read by an Asio
// progress thread so send_bytes never waits for the receiver (or by the
// receiver itself while it spins for a message, see PeerChannel::Pump), and
// `lanes` connections for collective steps, driven by the calling thread
// (LaneLinks).
// Collectives are the algorithms of rlx/collectives/ over LaneLinks. The first
// fatal error (peer lost, timeout, mismatch, protocol violation) is sent to
// every other rank and makes every later call on any rank fail with it.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "rlx/backends/tcp/lane_links.h"
#include "rlx/backends/tcp/mesh.h"
#include "rlx/backends/tcp/peer_channel.h"
#include "rlx/collectives/links_transport.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/failure_relay.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/mailbox.h"
#include "rlx/transport/subgroup_setup.h"

namespace rlx::tcp {

class TcpTransport final : public LinksTransport {
 public:
  // Joins the job described by `env` (rendezvous, listen, connect).
  explicit TcpTransport(const launch_env::LaunchEnv& env);
  // A group split() made: listens on `host` and learns its peers' endpoints
  // through `exchange` (over the parent group) instead of the rendezvous;
  // `watch` ends the wait for their connections early (split_as).
  TcpTransport(const launch_env::LaunchEnv& env, const std::string& host,
               const EndpointExchange& exchange, SetupWatch watch = {});
  ~TcpTransport() override;

  // Where this rank listens (for tests and diagnostics).
  std::uint16_t listen_port() const;

 protected:
  void send_over_network(int to, Tag tag, std::span<const std::byte> payload) override;
  std::vector<std::byte> recv_over_network(int from, Tag tag) override;
  std::size_t recv_over_network_into(int from, Tag tag, std::span<std::byte> into,
                                     std::size_t element) override;
  Mailbox& mailbox() override { return mailbox_; }
  Links& links() override { return *links_; }
  const FailureLatch& failure_latch() const override { return latch_; }

 private:
  struct Io;
  // The members, before any connection: what both public constructors start from.
  struct Unconnected {};
  TcpTransport(const launch_env::LaunchEnv& env, Unconnected);
  // Listens (on host:port, 0 for any) and returns the endpoint to advertise.
  HostPort listen(const std::string& host, std::uint16_t port);
  // Connects to every peer of `table`, then sets up shared memory.
  void join(const std::vector<HostPort>& table, Deadline deadline);
  void connect_mesh(const std::vector<HostPort>& table, Deadline deadline);
  // The next message from `from` with `tag` out of the mailbox, reading the
  // connection while it spins; throws timeout at `deadline`. `waiting`: the
  // caller counts as waiting already (Mailbox::take).
  std::vector<std::byte> take_from_mailbox(int from, Tag tag, Deadline deadline,
                                           Mailbox::WaitingReceiver* waiting = nullptr);
  std::shared_ptr<Transport> do_split(const SplitPlan& plan) override;
  // Records the failure; `tell_peers` sends it to every other rank first. A
  // failure heard from a peer is passed on only at close (close_gracefully).
  void fail(const CollectiveError& error, bool tell_peers);
  // FailureRelay's way out: one frame to every connected peer.
  void send_to_peers(const wire::FrameHeader& header, std::span<const std::byte> payload);
  // Pings every peer and names those whose progress thread does not answer
  // within a second (stopped or hung processes); for timeout messages.
  std::string describe_silent_peers();
  void close_gracefully();

  launch_env::LaunchEnv env_;
  SetupWatch setup_watch_;  // while connecting: a split's parent failed
  std::string host_;        // what this rank advertises, for the groups split() makes
  MeshSpec spec_;
  FailureLatch latch_;
  Mailbox mailbox_;
  FailureRelay relay_{rank(), latch_, mailbox_,
                      [this](const wire::FrameHeader& header, std::span<const std::byte> payload) {
                        send_to_peers(header, payload);
                      }};
  std::unique_ptr<Io> io_;
  std::unique_ptr<Listener> listener_;
  std::unique_ptr<ChannelPoller> poller_;               // watches the channels
  std::vector<std::unique_ptr<PeerChannel>> channels_;  // [peer]; null for self
  std::unique_ptr<LaneLinks> links_;
  std::mutex closed_mutex_;
  std::condition_variable closed_cv_;
};

}  // namespace rlx::tcp
