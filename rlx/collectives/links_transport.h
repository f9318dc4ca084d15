// A Transport whose collectives are this folder's algorithms over a Links:
// what the TCP and verbs transports share. Each collective call takes the
// next sequence number, so every rank's n-th call carries the same
// CollectiveCall and a rank that called something else fails with mismatch.
//
// Ranks of one host exchange through shared memory (same_host.h) unless
// RLX_SHM=0: point-to-point to such a peer, and collectives among them; a job
// spanning hosts runs its all-reduce and barrier hierarchically.
#pragma once

#include <cstdint>
#include <memory>

#include "rlx/collectives/algorithm_table.h"
#include "rlx/collectives/links.h"
#include "rlx/collectives/same_host.h"
#include "rlx/collectives/tuning.h"
#include "rlx/transport/failure_latch.h"
#include "rlx/transport/transport.h"

namespace rlx {

class LinksTransport : public Transport {
 public:
  ~LinksTransport() override;
  std::string path_to(int peer) const override;

 protected:
  // A transport of rank env.rank in a group of env.world_size, whose
  // algorithms are tuned by env's settings (tuning_for).
  LinksTransport(const launch_env::LaunchEnv& env, std::string backend);

  // The backend's links; called only once the group is connected.
  virtual Links& links() = 0;
  // Tripped by the job's first failure: a collective does not start after it.
  virtual const FailureLatch& failure_latch() const = 0;
  // Point-to-point over the backend's own connections: to peers on other
  // hosts, or to every peer when they do not share memory.
  virtual void send_over_network(int to, Tag tag, std::span<const std::byte> payload) = 0;
  virtual std::vector<std::byte> recv_over_network(int from, Tag tag) = 0;
  // The same into the caller's buffer, as Transport::do_recv_bytes_into; the
  // default receives the whole message and copies it (place_or_keep).
  virtual std::size_t recv_over_network_into(int from, Tag tag, std::span<std::byte> into,
                                             std::size_t element);
  // Where the backend parks what arrives over the network before anyone
  // receives it (and set_up_same_host's path what it reads for others).
  virtual Mailbox& mailbox() = 0;

  // Once links() work: finds which ranks share this host and moves what they
  // exchange to shared memory (every rank calls it at the same point of its
  // set-up; RLX_SHM=0 takes part but keeps the network). `hooks.all_gather`
  // is filled here.
  void set_up_same_host(const launch_env::LaunchEnv& env, Mailbox& mailbox, FailureLatch& latch,
                        SameHost::Hooks hooks);
  // First in the backend's destructor: the path uses its latch and mailbox.
  void tear_down_same_host();

  void do_send_bytes(int to, Tag tag, std::span<const std::byte> payload) final;
  std::vector<std::byte> do_recv_bytes(int from, Tag tag) final;
  std::size_t do_recv_bytes_into(int from, Tag tag, std::span<std::byte> into,
                                 std::size_t element) final;
  std::optional<std::size_t> do_try_recv_bytes_into(int from, Tag tag, std::span<std::byte> into,
                                                    std::size_t element) final;
  void do_expect_messages(int from, Tag tag, int change) final;
  void recycle(std::vector<std::byte>&& message) noexcept final;
  void do_all_reduce(ElementSpan data, ReduceOp op) final;
  void do_all_gather(ConstElementSpan input, ElementSpan output) final;
  void do_reduce_scatter(ConstElementSpan input, ElementSpan output, ReduceOp op) final;
  void do_broadcast(ElementSpan data, int root) final;
  void do_all_to_all(ConstElementSpan input, ElementSpan output) final;
  void do_reduce(ElementSpan data, ReduceOp op, int root) final;
  void do_gather(ConstElementSpan input, ElementSpan output, int root) final;
  void do_scatter(ConstElementSpan input, ElementSpan output, int root) final;
  void do_all_gather_v(ConstElementSpan input, ElementSpan output,
                       std::span<const std::size_t> counts) final;
  void do_all_to_all_v(ConstElementSpan input, std::span<const std::size_t> send_counts,
                       ElementSpan output, std::span<const std::size_t> recv_counts) final;
  void do_barrier() final;

 private:
  // Which ways this group's collectives can go: the network only, shared
  // memory only (every rank on one host), or both (hierarchical).
  Path route() const;
  // Runs `call` by the algorithm algorithm_table.h chooses.
  void run(const CollectiveCall& call, const CollectiveArgs& args);
  // Before a collective that runs over the network while this rank has host
  // peers: posts `call` where their shared-memory collectives look, so a
  // different call on either side is a mismatch, not a wait to the deadline.
  void check_on_host(const CollectiveCall& call);

  const Tuning tuning_;
  std::uint64_t setup_sequence_ = 0;  // set-up's own calls, numbered apart
  std::unique_ptr<SameHost> same_host_;
  ChoiceLog choices_;
};

}  // namespace rlx
