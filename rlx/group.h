// rlx::Group: the handle users hold on a group of ranks (what rlx::init
// returns), as MLX's Group: rank(), size() and split() on the handle, every
// call of the Transport behind it through ->. Copies share one group; the
// group closes when the last copy (or shared_ptr to its Transport) goes.
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include "rlx/transport/transport.h"

namespace rlx {

class Group {
 public:
  // No group: what split() gives a rank that passed kNoColor.
  Group() = default;
  // Wraps a transport (implicit, so a shared_ptr<Transport> is a Group).
  Group(std::shared_ptr<Transport> transport) : transport_(std::move(transport)) {}

  // This process's rank in the group, 0 .. size() - 1.
  int rank() const { return transport_->rank(); }
  int size() const { return transport_->world_size(); }
  // "singleton", "tcp", "mpi" or "verbs".
  std::string_view backend() const { return transport_->backend(); }
  // Transport::split: ranks with the same color form a new group, ordered
  // by key, then by rank here; an empty Group for kNoColor. A collective
  // call of every rank of this group.
  Group split(int color, int key = 0) const { return transport_->split(color, key); }

  // Every collective and point-to-point call: group->all_sum(...).
  Transport* operator->() const { return transport_.get(); }
  Transport& operator*() const { return *transport_; }
  Transport* get() const { return transport_.get(); }
  explicit operator bool() const { return transport_ != nullptr; }
  // For the calls that take the transport (rlx::distributed's array ops).
  operator std::shared_ptr<Transport>() const { return transport_; }
  const std::shared_ptr<Transport>& transport() const { return transport_; }

  friend bool operator==(const Group& a, const Group& b) = default;

 private:
  std::shared_ptr<Transport> transport_;
};

inline constexpr int kNoColor = Transport::kNoColor;

}  // namespace rlx
