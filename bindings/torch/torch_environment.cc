#include "bindings/torch/torch_environment.h"

#include <array>
#include <cstring>
#include <mutex>
#include <vector>

#include <unistd.h>

#include "rlx/init.h"
#include "rlx/transport/endpoint.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/socket_io.h"

namespace rlx::torch_backend {
namespace {

constexpr std::size_t kFieldBytes = 256;  // a host name, or "address:port"
using Field = std::array<char, kFieldBytes>;

std::mutex discovered_mutex;
std::optional<Group> discovered;

Field field_of(const std::string& text) {
  Field field{};
  std::memcpy(field.data(), text.data(), std::min(text.size(), kFieldBytes - 1));
  return field;
}

std::string this_host() {
  Field name{};
  gethostname(name.data(), kFieldBytes - 1);
  return name.data();
}

// Rank 0's address as the others reach it.
std::string master_address(const std::vector<std::string>& hosts) {
  if (auto configured = configured_address(launch_env::from_process_environment()))
    return *configured;
  for (const std::string& host : hosts)
    if (host != hosts[0]) return source_address_towards(host);
  return "127.0.0.1";
}

}  // namespace

std::map<std::string, std::string> torch_environment() {
  Group world = init();
  const int rank = world.rank();
  const int size = world.size();
  std::vector<Field> names(static_cast<std::size_t>(size));
  const Field mine = field_of(this_host());
  world->all_gather(ConstElementSpan{mine.data(), kFieldBytes, Dtype::u8},
                    ElementSpan{names.data(), kFieldBytes * names.size(), Dtype::u8});
  std::vector<std::string> hosts;
  for (const Field& name : names) hosts.emplace_back(name.data());
  Field master{};
  if (rank == 0) {
    const auto port = unused_port("0.0.0.0");
    if (!port) throw Error("no free port for torch's store: binding a socket to 0.0.0.0 failed");
    master = field_of(master_address(hosts) + ":" + std::to_string(*port));
  }
  world->broadcast(ElementSpan{master.data(), kFieldBytes, Dtype::u8}, 0);
  const HostPort at = parse_host_port(master.data(), "rank 0's address for torch's store");
  int local_rank = 0;
  int local_size = 0;
  for (int r = 0; r < size; ++r) {
    if (hosts[static_cast<std::size_t>(r)] != hosts[static_cast<std::size_t>(rank)]) continue;
    local_rank += r < rank;
    ++local_size;
  }
  {
    std::lock_guard lock(discovered_mutex);
    discovered = world;
  }
  return {{"RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(size)},
          {"LOCAL_RANK", std::to_string(local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(local_size)},
          {"MASTER_ADDR", at.host},
          {"MASTER_PORT", std::to_string(at.port)}};
}

std::optional<Group> take_discovered_world(int rank, int size) {
  std::lock_guard lock(discovered_mutex);
  if (!discovered || discovered->rank() != rank || discovered->size() != size) return std::nullopt;
  return std::exchange(discovered, std::nullopt);
}

}  // namespace rlx::torch_backend
