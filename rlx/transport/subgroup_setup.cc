#include "rlx/transport/subgroup_setup.h"

#include <array>
#include <cstring>
#include <string>

#include "rlx/transport/auth.h"

namespace rlx {
namespace {

// One rank's endpoint as all_gather carries it: fixed size.
struct EndpointRecord {
  std::uint16_t port = 0;
  std::uint8_t host_length = 0;
  std::array<char, 255> host{};
};

std::string hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (std::byte b : bytes) {
    text += kDigits[std::to_integer<int>(b) >> 4];
    text += kDigits[std::to_integer<int>(b) & 15];
  }
  return text;
}

// "its ranks 0, 1, 2 are ranks 1, 3, 5 here": how to read the new group's
// rank numbers in a message the parent's ranks get.
std::string member_map(const SplitPlan& plan) {
  constexpr std::size_t kListed = 16;
  std::string theirs, here;
  for (std::size_t i = 0; i < plan.members.size() && i < kListed; ++i) {
    const char* comma = i == 0 ? "" : ", ";
    theirs += comma + std::to_string(i);
    here += comma + std::to_string(plan.members[i]);
  }
  const char* more = plan.members.size() > kListed ? ", ..." : "";
  return "its ranks " + theirs + more + " are ranks " + here + more + " here";
}

}  // namespace

launch_env::LaunchEnv subgroup_env(const launch_env::LaunchEnv& parent, const SplitPlan& plan) {
  launch_env::LaunchEnv env = parent;
  env.rank = plan.rank;
  env.world_size = static_cast<int>(plan.members.size());
  env.coordinator.clear();
  env.hostfile.clear();
  const std::string label =
      "split " + std::to_string(plan.number) + " color " + std::to_string(plan.color);
  const std::span<const std::byte> parts[] = {std::as_bytes(std::span(label))};
  env.job_token = hex(auth::mac(parent.job_token, parts));
  return env;
}

std::vector<HostPort> exchange_over(Transport& parent, const SplitPlan& plan,
                                    const HostPort& mine) {
  EndpointRecord record;
  if (mine.host.size() > record.host.size()) {
    throw CollectiveError(ErrorKind::invalid_argument, parent.site("split"),
                          "the host name " + mine.host + " is over 255 bytes");
  }
  record.port = mine.port;
  record.host_length = static_cast<std::uint8_t>(mine.host.size());
  std::memcpy(record.host.data(), mine.host.data(), mine.host.size());
  std::vector<EndpointRecord> all(static_cast<std::size_t>(parent.world_size()));
  parent.all_gather(ConstElementSpan{&record, sizeof record, Dtype::u8},
                    ElementSpan{all.data(), all.size() * sizeof record, Dtype::u8});
  std::vector<HostPort> table;
  for (int member : plan.members) {
    const EndpointRecord& theirs = all[static_cast<std::size_t>(member)];
    table.push_back({std::string(theirs.host.data(), theirs.host_length), theirs.port});
  }
  return table;
}

CollectiveError setup_failure(Transport& parent, const SplitPlan& plan, std::exception_ptr error) {
  ErrorSite site = parent.site("split");
  try {
    std::rethrow_exception(error);
  } catch (const CollectiveError& e) {
    // A peer the new group lost or waited for is blamed by its rank in the
    // parent; any other failure is this rank's own (the relay blames it).
    const bool names_a_member =
        e.rank() >= 0 && e.peer() >= 0 && e.peer() < static_cast<int>(plan.members.size()) &&
        (e.kind() == ErrorKind::peer_lost || e.kind() == ErrorKind::timeout);
    if (names_a_member) site.peer = plan.members[static_cast<std::size_t>(e.peer())];
    return CollectiveError(
        e.kind(), std::move(site),
        "could not make its part of the new group (" + member_map(plan) + "): " + e.detail(),
        e.hint());
  } catch (const std::exception& e) {
    return CollectiveError(ErrorKind::resource_exhausted, std::move(site),
                           std::string("could not make its part of the new group: ") + e.what());
  } catch (...) {
    return CollectiveError(ErrorKind::resource_exhausted, std::move(site),
                           "could not make its part of the new group");
  }
}

}  // namespace rlx
