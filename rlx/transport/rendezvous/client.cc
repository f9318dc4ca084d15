#include "rlx/transport/rendezvous/client.h"

#include <optional>

#include "rlx/transport/errors.h"
#include "rlx/transport/log.h"
#include "rlx/transport/rendezvous/protocol.h"
#include "rlx/transport/wire.h"

namespace rlx::rendezvous {
namespace {

std::vector<std::byte> read_message(int fd, Deadline deadline) {
  std::array<std::byte, 4> length{};
  recv_exact(fd, length, deadline);
  const auto size = wire::ByteReader(length).u32();
  if (size > kMaxMessageBytes) {
    throw wire::DecodeError("the coordinator announced a " + std::to_string(size) +
                            "-byte message");
  }
  std::vector<std::byte> body(size);
  recv_exact(fd, body, deadline);
  return body;
}

void write_message(int fd, const std::vector<std::byte>& body, Deadline deadline) {
  wire::ByteWriter w;
  w.u32(static_cast<std::uint32_t>(body.size()));
  w.raw(body);
  send_all(fd, w.bytes(), deadline);
}

}  // namespace

CoordinatorConnection connect_to_coordinator(const launch_env::LaunchEnv& env, Deadline deadline,
                                             std::string_view how_to_start) {
  if (env.coordinator.empty()) {
    throw CollectiveError(ErrorKind::invalid_argument, startup_site(env, "rendezvous"),
                          "RLX_COORDINATOR is not set", std::string(how_to_start));
  }
  CoordinatorConnection connection{.address = parse_host_port(env.coordinator, "RLX_COORDINATOR")};
  try {
    connection.fd = connect_with_retry(connection.address, deadline);
  } catch (const IoError& error) {
    if (error.kind() == IoError::Kind::out_of_descriptors) {
      throw out_of_descriptors(startup_site(env, "rendezvous"),
                               "a socket to connect to " + env.coordinator, error.error_number());
    }
    if (env.group_source == launch_env::GroupSource::torchrun) {
      throw CollectiveError(ErrorKind::timeout, startup_site(env, "rendezvous"),
                            std::string("rank 0, which hosts the rendezvous at MASTER_ADDR:"
                                        "MASTER_PORT, never answered: ") +
                                error.what(),
                            "is rank 0 running, and is MASTER_ADDR its address?");
    }
    throw CollectiveError(ErrorKind::timeout, startup_site(env, "rendezvous"), error.what(),
                          "is the launcher (RLX_COORDINATOR) still running?");
  }
  log_lazily(LogLevel::debug, [&] { return "connected to the rendezvous at " + env.coordinator; });
  return connection;
}

std::vector<HostPort> exchange_endpoints(int coordinator, const HostPort& coordinator_address,
                                         std::string_view token, int rank, int world_size,
                                         const HostPort& self, Deadline deadline) {
  const ErrorSite site{.rank = rank,
                       .world_size = world_size,
                       .operation = "rendezvous with " + coordinator_address.to_string()};
  std::optional<Waiting> last_notice;
  bool registered = false;
  try {
    const auth::Nonce server_nonce = decode_server_hello(read_message(coordinator, deadline));
    Registration reg{static_cast<std::uint32_t>(world_size), static_cast<std::uint32_t>(rank), self,
                     auth::fresh_nonce()};
    write_message(coordinator, encode_register(reg, token, server_nonce), deadline);
    registered = true;
    auto body = read_message(coordinator, deadline);
    for (; is_waiting(body); body = read_message(coordinator, deadline)) {
      last_notice = decode_waiting(body, token, reg.nonce);
    }
    auto table = decode_table(body, token, reg.nonce);
    if (table.size() != static_cast<std::size_t>(world_size)) {
      throw wire::DecodeError("the table lists " + std::to_string(table.size()) + " ranks");
    }
    return table;
  } catch (const wire::DecodeError& error) {
    throw CollectiveError(ErrorKind::protocol_violation, site, error.what(),
                          "RLX_COORDINATOR must be this job's rlxrun, with the same RLX_JOB_TOKEN");
  } catch (const IoError& error) {
    const auto kind =
        error.kind() == IoError::Kind::timeout ? ErrorKind::timeout : ErrorKind::peer_lost;
    // The last notice names who never came, and any rank the rendezvous
    // refused; a registration answered by a close was refused itself.
    std::string detail = std::string("the table of ranks did not arrive: ") + error.what();
    if (last_notice) {
      detail += "; " + describe(*last_notice);
    } else if (registered && kind == ErrorKind::peer_lost) {
      detail +=
          " after this rank registered: the rendezvous refused the registration (another "
          "RLX_JOB_TOKEN or group size, or this rank twice: its log says which) or stopped";
    }
    throw CollectiveError(kind, site, detail,
                          "every rank must start and reach rlx::init within "
                          "RLX_CONNECT_TIMEOUT_S, with this job's RLX_JOB_TOKEN; the launcher "
                          "names ranks that never did");
  }
}

}  // namespace rlx::rendezvous
