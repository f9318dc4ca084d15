#include "rlx/backends/verbs/queue_pair.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

namespace rlx::verbs {

std::uint64_t encode_work_id(const WorkId& id) {
  return (std::uint64_t{static_cast<std::uint8_t>(id.kind)} << 56) |
         (std::uint64_t{id.owner & 0xffffff} << 32) | id.index;
}

WorkId decode_work_id(std::uint64_t wr_id) {
  return {static_cast<WorkKind>(wr_id >> 56), static_cast<std::uint32_t>((wr_id >> 32) & 0xffffff),
          static_cast<std::uint32_t>(wr_id)};
}

QueueShape create_queue_pair(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, QueueShape wanted) {
  int last_error = 0;
  for (std::uint32_t inline_bytes : {256u, 128u, 64u, 0u}) {
    ibv_qp_init_attr attr{};
    attr.send_cq = cq;
    attr.recv_cq = cq;
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 0;
    attr.cap.max_send_wr = wanted.send_depth;
    attr.cap.max_recv_wr = wanted.recv_depth;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = inline_bytes;
    if (rdma_create_qp(id, pd, &attr) == 0) {
      return {attr.cap.max_send_wr, attr.cap.max_recv_wr, attr.cap.max_inline_data};
    }
    last_error = errno;
  }
  throw std::runtime_error(std::string("rdma_create_qp failed: ") + std::strerror(last_error));
}

namespace {

int normalise(int result) { return result < 0 ? -result : result; }

}  // namespace

int post_recv(ibv_qp* qp, std::uint64_t wr_id, void* address, std::uint32_t bytes,
              std::uint32_t lkey) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(address), bytes, lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  return normalise(ibv_post_recv(qp, &wr, &bad));
}

int post_send(ibv_qp* qp, std::uint64_t wr_id, const void* address, std::uint32_t bytes,
              std::uint32_t lkey, bool send_inline) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(address), bytes, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (send_inline ? unsigned{IBV_SEND_INLINE} : 0u);
  ibv_send_wr* bad = nullptr;
  return normalise(ibv_post_send(qp, &wr, &bad));
}

int post_write_with_imm(ibv_qp* qp, std::uint64_t wr_id, const void* address, std::uint32_t bytes,
                        std::uint32_t lkey, std::uint64_t remote_address, std::uint32_t rkey,
                        std::uint32_t imm, bool send_inline) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(address), bytes, lkey};
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED | (send_inline ? unsigned{IBV_SEND_INLINE} : 0u);
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = remote_address;
  wr.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  return normalise(ibv_post_send(qp, &wr, &bad));
}

const char* verb_name(WorkKind kind) {
  switch (kind) {
    case WorkKind::recv:
    case WorkKind::handshake_recv:
      return "RECV";
    case WorkKind::send:
    case WorkKind::handshake_send:
      return "SEND";
    case WorkKind::write:
      return "RDMA WRITE_WITH_IMM";
  }
  return "work request";
}

std::string describe_status(const ibv_wc& wc) {
  return std::string(ibv_wc_status_str(wc.status)) + " (status " +
         std::to_string(static_cast<int>(wc.status)) + ", vendor error " +
         std::to_string(wc.vendor_err) + ")";
}

}  // namespace rlx::verbs
