// Work requests on reliable-connected queue pairs: creating the QP, posting,
// and naming what a completion was for.
//
// Every work request carries a WorkId in its wr_id, so a completion is routed
// to its owner (a peer's data path, or a connection still in its handshake)
// without a lookup table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

struct ibv_qp;
struct ibv_pd;
struct ibv_cq;
struct ibv_wc;
struct rdma_cm_id;

namespace rlx::verbs {

enum class WorkKind : std::uint8_t {
  recv = 1,            // a pre-posted receive buffer of a peer
  send = 2,            // an eager SEND from a send buffer (index), or inline
  write = 3,           // an RDMA WRITE_WITH_IMM from a staging slot (index)
  handshake_recv = 4,  // a connection being authenticated (owner: session)
  handshake_send = 5,
};

struct WorkId {
  WorkKind kind = WorkKind::recv;
  std::uint32_t owner = 0;  // peer rank or handshake session, 24 bits
  std::uint32_t index = 0;  // buffer or slot
};

std::uint64_t encode_work_id(const WorkId& id);
WorkId decode_work_id(std::uint64_t wr_id);

struct QueueShape {
  std::uint32_t send_depth = 0;
  std::uint32_t recv_depth = 0;
  std::uint32_t max_inline = 0;  // filled in by create_queue_pair: what the device granted
};

// Creates the RC queue pair of `id` on `pd` with both queues on `cq`. Asks for
// 256 bytes of inline data and settles for less when the device refuses
// (siw allows 80). Returns the granted shape; throws std::runtime_error.
QueueShape create_queue_pair(rdma_cm_id* id, ibv_pd* pd, ibv_cq* cq, QueueShape wanted);

// Post one work request; 0 or a positive errno (siw returns negative ones).
int post_recv(ibv_qp* qp, std::uint64_t wr_id, void* address, std::uint32_t bytes,
              std::uint32_t lkey);
int post_send(ibv_qp* qp, std::uint64_t wr_id, const void* address, std::uint32_t bytes,
              std::uint32_t lkey, bool send_inline);
int post_write_with_imm(ibv_qp* qp, std::uint64_t wr_id, const void* address, std::uint32_t bytes,
                        std::uint32_t lkey, std::uint64_t remote_address, std::uint32_t rkey,
                        std::uint32_t imm, bool send_inline);

// "RDMA WRITE_WITH_IMM", "SEND", "RECV": the verb a work request kind posts.
const char* verb_name(WorkKind kind);
// "transport retry counter exceeded (status 12)".
std::string describe_status(const ibv_wc& wc);

}  // namespace rlx::verbs
