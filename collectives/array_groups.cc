// The groups the collective ops name by id (array_collectives.h).
#include "collectives/array_groups.h"

#include <mutex>
#include <vector>

#include "collectives/array_collectives.h"

namespace rlx::distributed {
namespace {

// Groups by id; id 0 is the default group (unset until rlx::init sets it).
struct GroupTable {
  std::mutex mutex;
  std::vector<std::shared_ptr<Transport>> groups{nullptr};
};

GroupTable& table() {
  static GroupTable instance;
  return instance;
}

}  // namespace

std::shared_ptr<Transport> group_at(int id, std::string_view op) {
  GroupTable& t = table();
  std::lock_guard lock(t.mutex);
  if (id < 0 || static_cast<std::size_t>(id) >= t.groups.size() ||
      !t.groups[static_cast<std::size_t>(id)]) {
    throw Error(
        std::string(op) + ": no group " + std::to_string(id) +
        (id == 0 ? " (call rlx::init() before building collective ops, or pass a group)" : ""));
  }
  return t.groups[static_cast<std::size_t>(id)];
}

void set_default_group(std::shared_ptr<Transport> group) {
  GroupTable& t = table();
  std::lock_guard lock(t.mutex);
  t.groups[0] = std::move(group);
}

int group_id(const std::shared_ptr<Transport>& group) {
  GroupTable& t = table();
  std::lock_guard lock(t.mutex);
  for (std::size_t i = 0; i < t.groups.size(); ++i) {
    if (t.groups[i] == group) return static_cast<int>(i);
  }
  t.groups.push_back(group);
  return static_cast<int>(t.groups.size() - 1);
}

}  // namespace rlx::distributed
