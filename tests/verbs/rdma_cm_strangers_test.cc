// Strangers on the rdma_cm port of a job over RDMA verbs: the one fault case
// that only verbs has (faults_test runs the others on verbs too). It needs a
// real RDMA device: tests/verbs/run_in_vm.sh runs it inside a QEMU VM with
// Soft-RoCE, with RLX_FAULTS_BACKEND=verbs.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>

#include "rlx/transport/handshake.h"
#include "rlx/transport/socket_io.h"
#include "tests/faults/fault_job.h"
#include "tests/support/job_harness.h"

namespace rlx::testing {
namespace {

using namespace std::chrono_literals;

// A stranger speaking rdma_cm to a rank's listening port.
class Stranger {
 public:
  explicit Stranger(const HostPort& target) {
    channel_ = rdma_create_event_channel();
    if (channel_ == nullptr || rdma_create_id(channel_, &id_, nullptr, RDMA_PS_TCP) != 0) {
      throw std::runtime_error("rdma_create_id failed");
    }
    addrinfo hints{};
    hints.ai_flags = AI_NUMERICHOST;
    addrinfo* found = nullptr;
    if (::getaddrinfo(target.host.c_str(), std::to_string(target.port).c_str(), &hints, &found) !=
        0) {
      throw std::runtime_error("bad address " + target.to_string());
    }
    const int rc = rdma_resolve_addr(id_, nullptr, found->ai_addr, 2000);
    ::freeaddrinfo(found);
    if (rc != 0 || next_event() != RDMA_CM_EVENT_ADDR_RESOLVED) {
      throw std::runtime_error("cannot resolve " + target.to_string());
    }
    if (rdma_resolve_route(id_, 2000) != 0 || next_event() != RDMA_CM_EVENT_ROUTE_RESOLVED) {
      throw std::runtime_error("cannot route to " + target.to_string());
    }
    ibv_qp_init_attr attr{};
    attr.qp_type = IBV_QPT_RC;
    attr.cap = {4, 4, 1, 1, 64};
    if (rdma_create_qp(id_, nullptr, &attr) != 0) throw std::runtime_error("rdma_create_qp");
  }
  ~Stranger() {
    if (id_ != nullptr) {
      rdma_disconnect(id_);
      if (id_->qp != nullptr) rdma_destroy_qp(id_);
      rdma_destroy_id(id_);
    }
    if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
  }

  // Connects with `data` as private data; returns the event that answered.
  int connect(std::span<const std::byte> data) {
    rdma_conn_param param{};
    param.private_data = data.data();
    param.private_data_len = static_cast<std::uint8_t>(data.size());
    param.retry_count = 3;
    if (rdma_connect(id_, &param) != 0) return -1;
    return next_event();
  }

  // An inline SEND; true if the device accepted it.
  bool send(std::span<const std::byte> data) {
    ibv_sge sge{reinterpret_cast<std::uintptr_t>(data.data()),
                static_cast<std::uint32_t>(data.size()), 0};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_INLINE;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(id_->qp, &wr, &bad) == 0;
  }

  // The next rdma_cm event within 5 s, or -1.
  int next_event() {
    pollfd fd{channel_->fd, POLLIN, 0};
    if (::poll(&fd, 1, 5000) <= 0) return -1;
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel_, &event) != 0) return -1;
    const int type = event->event;
    rdma_ack_cm_event(event);
    return type;
  }

 private:
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
};

// Garbage and a wrong token on every rank's rdma_cm port of a running job:
// each is refused (and logged), and the job completes with correct results.
TEST(VerbsFaults, StrangersOnTheRdmaCmPortChangeNothing) {
  ASSERT_EQ(fault_backend(), "verbs") << "run with RLX_FAULTS_BACKEND=verbs (vm_suite.sh does)";
  std::vector<int> answers;
  auto attack = [&](const rendezvous::Server& server) {
    const auto endpoints = server.endpoints();
    for (std::size_t rank = 0; rank < endpoints.size(); ++rank) {
      Stranger garbage(endpoints[rank]);
      const std::string junk(56, '\x7f');
      answers.push_back(garbage.connect(std::as_bytes(std::span(junk))));

      // A well-formed hello from "rank 2", then a proof made without the token.
      Stranger impostor(endpoints[rank]);
      const auto hello =
          wire::encode_hello({3, 2, static_cast<std::uint32_t>(rank), 0, auth::fresh_nonce()});
      if (impostor.connect(hello) == RDMA_CM_EVENT_ESTABLISHED) {
        const std::array<std::byte, 56> wrong_proof{};
        EXPECT_TRUE(impostor.send(wrong_proof));
        EXPECT_EQ(impostor.next_event(), RDMA_CM_EVENT_DISCONNECTED);
      }
    }
    UniqueFd at_rendezvous = connect_with_retry(server.address(), Clock::now() + 10s);
    const std::string hello = "hello?";
    send_all(at_rendezvous.get(), std::as_bytes(std::span(hello)), Clock::now() + 10s);
  };
  const JobOutcome job = run_fault_mode("steady", 3, {"RLX_TIMEOUT_S=30"}, attack);
  std::printf("%s", describe(job).c_str());
  for (const auto& rank : job.ranks) EXPECT_TRUE(rank.exited_ok()) << describe(job);
  for (int answer : answers) EXPECT_EQ(answer, RDMA_CM_EVENT_REJECTED);
  int refusals = 0;
  for (const auto& rank : job.ranks) refusals += count_of(rank.err, "refused a connection");
  EXPECT_GE(refusals, 6) << describe(job);  // garbage and impostor, on each of 3 ranks
  EXPECT_NE(describe(job).find("wrong job token"), std::string::npos) << describe(job);
}

}  // namespace
}  // namespace rlx::testing
