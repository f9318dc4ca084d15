// The groups the collective ops name by id (array_collectives.h).
#include "rlx/collectives/array_groups.h"

#include <mutex>
#include <vector>

#include "rlx/collectives/array_collectives.h"

namespace rlx::distributed {
namespace {

// Id 0 is the default group, held until the process ends (rlx::init keeps
// it too). Other groups are held weakly, so a group an array op named still
// closes when its last handle goes; its id is never given to another group,
// so an op built for it fails instead of running on a stranger.
struct GroupTable {
  std::mutex mutex;
  std::shared_ptr<Transport> default_group;
  std::vector<std::weak_ptr<Transport>> groups{{}};  // [0] unused

  static bool same(const std::weak_ptr<Transport>& slot, const std::shared_ptr<Transport>& group) {
    return !slot.owner_before(group) && !group.owner_before(slot);
  }
};

GroupTable& table() {
  static GroupTable instance;
  return instance;
}

}  // namespace

std::shared_ptr<Transport> group_at(int id, std::string_view op) {
  GroupTable& t = table();
  std::lock_guard lock(t.mutex);
  if (id == 0 && t.default_group) return t.default_group;
  if (id <= 0 || static_cast<std::size_t>(id) >= t.groups.size()) {
    throw Error(
        std::string(op) + ": no group " + std::to_string(id) +
        (id == 0 ? " (call rlx::init() before building collective ops, or pass a group)" : ""));
  }
  auto group = t.groups[static_cast<std::size_t>(id)].lock();
  if (!group) {
    throw Error(std::string(op) + ": group " + std::to_string(id) +
                " was closed: its last handle went before this op ran (keep the Group until "
                "the arrays that use it are evaluated)");
  }
  return group;
}

void set_default_group(std::shared_ptr<Transport> group) {
  GroupTable& t = table();
  std::lock_guard lock(t.mutex);
  t.default_group = std::move(group);
}

int group_id(const std::shared_ptr<Transport>& group) {
  GroupTable& t = table();
  std::lock_guard lock(t.mutex);
  if (group == t.default_group) return 0;
  for (std::size_t i = 1; i < t.groups.size(); ++i) {
    if (t.groups[i].expired()) {
      t.groups[i].reset();  // frees a closed group's memory; the id stays retired
    } else if (GroupTable::same(t.groups[i], group)) {
      return static_cast<int>(i);
    }
  }
  t.groups.push_back(group);
  return static_cast<int>(t.groups.size() - 1);
}

}  // namespace rlx::distributed
