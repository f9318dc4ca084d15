// Joining a group through a key-value store that the ranks already share:
// torch.distributed's c10d::Store, Redis, a file system. For programs whose
// launcher rlx does not know, and for rlx groups made inside another
// framework's (the torch backend's process groups, bindings/torch).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "rlx/group.h"

namespace rlx {

// The two calls rlx needs of a store. Keys are rlx's ("rlx/..."); a store
// shared with other users should be a prefixed view (c10d::PrefixStore), one
// per group made through it.
struct KeyValueStore {
  std::function<void(const std::string& key, const std::string& value)> set;
  // Waits until `key` is set and returns its value; throws (any exception,
  // its text kept in rlx's error) when the store gives up.
  std::function<std::string(const std::string& key)> get;
};

struct JoinOptions {
  // "any" (verbs when RLX_BACKEND says so, else tcp), "tcp" or "verbs": the
  // backends that connect ranks by endpoints. Shared memory between ranks of
  // one host comes with either, as under rlxrun.
  std::string_view backend = "any";
  // Every call's deadline; zero keeps RLX_TIMEOUT_S (300 s by default).
  std::chrono::milliseconds timeout{0};
  // A host every rank reaches (the store's, say): each rank is reached at
  // its own address that routes there. Empty: MASTER_ADDR's, else loopback.
  // RLX_HOST_ADDRESS or RLX_IFNAME, when set, come first.
  std::string reach_from;
};

// Makes a group of `size` ranks in which this process is `rank`: rank 0
// puts a fresh job token in the store, every rank its endpoint, and each
// reads the others'. Every other setting is read from RLX_* as init() reads
// it; launchers' rank variables (RANK, OMPI_COMM_WORLD_RANK, ...) are
// ignored: the caller says who is who. Independent of init()'s group: call
// it once per group. Throws CollectiveError: invalid_argument (bad rank,
// size or backend), timeout (a store's get, naming the key, or a peer that
// never connected), backend_unavailable.
Group join(int rank, int size, const KeyValueStore& store, const JoinOptions& options = {});

}  // namespace rlx
