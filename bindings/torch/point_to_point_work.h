// torch's Work for a send or receive: an rlx request, posted at once, so a
// pending receive never holds up the group's collectives.
#pragma once

#include <functional>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "rlx/transport/request.h"

namespace rlx::torch_backend {

class PointToPointWork final : public c10d::Work {
 public:
  // `buffers` are what rlx reads or writes until the request completes;
  // `finish` runs once it did (a receive's length check and its copy into a
  // tensor that was not contiguous).
  PointToPointWork(int rank, c10d::OpType type, const char* title, std::vector<at::Tensor> result,
                   std::vector<at::Tensor> buffers, Request request,
                   std::function<void(std::size_t bytes)> finish = {});
  // An unfinished request keeps its buffers: they go to the orphans
  // (reap_orphans), which hold them until it completes.
  ~PointToPointWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  // Blocks until rlx's request completed (its deadline bounds it), or throws
  // after `timeout` when one is given.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return result_; }

 private:
  // Under mutex_: completes the Work when rlx's request completed (blocking
  // when `block`); returns completed_.
  bool advance_locked(bool block);

  std::vector<at::Tensor> result_;
  std::vector<at::Tensor> buffers_;
  Request request_;
  std::function<void(std::size_t)> finish_;
};

// Drops the orphans whose requests completed: called before each new send
// or receive.
void reap_orphans();

}  // namespace rlx::torch_backend
