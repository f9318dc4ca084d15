// What every rank sees when a job over RDMA verbs goes wrong: the cases of
// tests/faults (same fault_program) with RLX_BACKEND=verbs, plus strangers on
// the rdma_cm port. It needs a real RDMA device: tests/verbs/run_in_vm.sh runs
// it inside a QEMU VM with Soft-RoCE.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <signal.h>

#include "tests/support/job_harness.h"
#include "transport/handshake.h"
#include "transport/socket_io.h"

namespace rlx::testing {
namespace {

using namespace std::chrono_literals;

JobOutcome run_mode(const std::string& mode, int ranks, std::vector<std::string> env = {},
                    std::function<void(const rendezvous::Server&)> hook = {}) {
  env.insert(env.begin(), "RLX_BACKEND=verbs");
  return run_job({.ranks = ranks,
                  .argv = {sibling_program("fault_program"), mode},
                  .env = std::move(env),
                  .limit = 90s,
                  .while_running = std::move(hook)});
}

long long reported_ms(const std::string& out) {
  const auto at = out.find("ms=");
  return at == std::string::npos ? -1 : std::atoll(out.c_str() + at + 3);
}

std::string describe(const JobOutcome& job) {
  std::string text;
  for (std::size_t r = 0; r < job.ranks.size(); ++r) {
    text += "--- rank " + std::to_string(r) + " status " + std::to_string(job.ranks[r].status) +
            "\n" + job.ranks[r].out + job.ranks[r].err;
  }
  return text;
}

TEST(VerbsFaults, MismatchedSizesFailEveryRankWithAMismatchNamingBothCalls) {
  const JobOutcome job = run_mode("mismatch_size", 3, {"RLX_TIMEOUT_S=60"});
  for (const auto& rank : job.ranks) {
    EXPECT_TRUE(rank.exited_ok()) << describe(job);
    EXPECT_LT(reported_ms(rank.out), 10000) << describe(job);
    EXPECT_NE(rank.out.find("collective mismatch"), std::string::npos) << describe(job);
  }
  EXPECT_NE(describe(job).find("1000 x f32"), std::string::npos) << describe(job);
  EXPECT_NE(describe(job).find("2000 x f32"), std::string::npos) << describe(job);
}

TEST(VerbsFaults, TheEarlyMessageCapSparesMessagesAReceiverWaitsFor) {
  const JobOutcome job =
      run_mode("message_over_cap", 2, {"RLX_TIMEOUT_S=30", "RLX_UNEXPECTED_BYTES=1048576"});
  for (const auto& rank : job.ranks) EXPECT_TRUE(rank.exited_ok()) << describe(job);
}

TEST(VerbsFaults, DifferentCollectivesFailEveryRankWithAMismatch) {
  const JobOutcome job = run_mode("mismatch_kind", 2, {"RLX_TIMEOUT_S=60"});
  for (const auto& rank : job.ranks) EXPECT_TRUE(rank.exited_ok()) << describe(job);
  EXPECT_NE(describe(job).find("barrier"), std::string::npos);
}

TEST(VerbsFaults, AKilledPeerBecomesPeerLostOnEveryOtherRankWithinSeconds) {
  const JobOutcome job = run_mode("peer_killed", 3, {"RLX_TIMEOUT_S=60"});
  std::printf("%s", describe(job).c_str());  // the messages, in the VM suite's log
  ASSERT_EQ(job.ranks.size(), 3u);
  EXPECT_TRUE(job.ranks[2].killed_by(SIGKILL)) << describe(job);
  for (int r = 0; r < 2; ++r) {
    const auto& rank = job.ranks[static_cast<std::size_t>(r)];
    EXPECT_TRUE(rank.exited_ok()) << describe(job);
    EXPECT_LT(reported_ms(rank.out), 10000) << describe(job);
    EXPECT_NE(rank.out.find("rank 2"), std::string::npos) << describe(job);
  }
}

TEST(VerbsFaults, AReceiveNobodyAnswersTimesOutAtTheDeadlineNamingThePeerAndTag) {
  const JobOutcome job = run_mode("recv_timeout", 2, {"RLX_TIMEOUT_S=1"});
  for (const auto& rank : job.ranks) EXPECT_TRUE(rank.exited_ok()) << describe(job);
  const auto& out = job.ranks[0].out;
  EXPECT_GE(reported_ms(out), 900) << out;
  EXPECT_LT(reported_ms(out), 5000) << out;
  EXPECT_NE(out.find("recv_bytes (tag 77) with peer rank 1"), std::string::npos) << out;
}

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
  const JobOutcome job = run_mode("steady", 3, {"RLX_TIMEOUT_S=30"}, attack);
  std::printf("%s", describe(job).c_str());
  for (const auto& rank : job.ranks) EXPECT_TRUE(rank.exited_ok()) << describe(job);
  for (int answer : answers) EXPECT_EQ(answer, RDMA_CM_EVENT_REJECTED);
  int refusals = 0;
  for (const auto& rank : job.ranks) {
    for (std::size_t at = 0; (at = rank.err.find("refused a connection", at)) != std::string::npos;
         ++at) {
      ++refusals;
    }
  }
  EXPECT_GE(refusals, 6) << describe(job);  // garbage and impostor, on each of 3 ranks
  EXPECT_NE(describe(job).find("wrong job token"), std::string::npos) << describe(job);
}

}  // namespace
}  // namespace rlx::testing
