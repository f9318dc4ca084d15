// The point-to-point layer every collective algorithm is written against.
//
// An algorithm is a sequence of steps. In one step a rank sends some buffers
// and receives others, all concurrently; a receive may instead combine the
// incoming elements into its buffer (reduce) as they arrive, so receiving and
// reducing overlap. A backend (TCP, verbs) implements exchange() over its own
// connections; the algorithms in this folder never see sockets or queue pairs.
//
// Every step carries the CollectiveCall it belongs to. A backend sends it with
// the data and checks what arrives against its own, so ranks that called
// different collectives, or the same one with different sizes, fail with
// ErrorKind::mismatch instead of exchanging garbage or waiting forever.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "rlx/transport/collective_call.h"
#include "rlx/transport/transport.h"

namespace rlx {

struct StepSend {
  int peer = 0;
  int lane = 0;
  std::span<const std::byte> bytes;
};

struct StepRecv {
  int peer = 0;
  int lane = 0;
  std::span<std::byte> into;  // exactly this many bytes arrive
  bool reduce = false;        // into = call.op(into, incoming), elementwise in call.dtype
};

class Links {
 public:
  virtual ~Links() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Independent streams between each pair of ranks (at least 1).
  virtual int lanes() const = 0;

  // Runs one step: every send and receive progresses concurrently until all
  // have completed. A (peer, lane) pair appears at most once among the sends
  // and at most once among the receives. `step` numbers the steps of a call.
  // Throws CollectiveError (timeout, peer_lost, mismatch, protocol_violation).
  virtual void exchange(const CollectiveCall& call, std::uint32_t step,
                        std::span<const StepSend> sends, std::span<const StepRecv> recvs) = 0;

  // Scratch memory of at least `bytes`, kept and reused between calls so the
  // hot path allocates nothing once warm. Valid until the next scratch() call.
  virtual std::span<std::byte> scratch(std::size_t bytes) = 0;
};

}  // namespace rlx
