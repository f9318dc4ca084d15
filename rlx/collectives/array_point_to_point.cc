// Point-to-point on lazy arrays: the collective.send and collective.recv_like
// ops (array_collectives.h), at both levels of core's registries, as MLX's
// send and recv_like: a pipeline stage sends its activations and the next
// stage receives them, inside the graph.
#include <cstring>
#include <mutex>
#include <sstream>

#include "rlx/collectives/array_collectives.h"
#include "rlx/collectives/array_groups.h"
#include "rlx/core/custom.h"
#include "rlx/core/registry.h"

namespace rlx::distributed {
namespace {

constexpr const char* kSend = "collective.send";
constexpr const char* kRecvLike = "collective.recv_like";

struct PeerAttrs {
  int peer = 0;
  Tag tag = 0;
  int group = 0;
};

// "<peer> <tag> <group>"; the peer must be a rank of the group.
PeerAttrs parse_peer_attrs(std::string_view text, std::string_view op) {
  std::istringstream in{std::string(text)};
  PeerAttrs attrs;
  if (!(in >> attrs.peer >> attrs.tag >> attrs.group) || !(in >> std::ws).eof() ||
      attrs.tag > kMaxTag) {
    throw Error(std::string(op) + ": attributes '" + std::string(text) +
                "': expected '<peer rank> <tag 0.." + std::to_string(kMaxTag) + "> <group id>'");
  }
  const int size = group_at(attrs.group, op)->world_size();
  if (attrs.peer < 0 || attrs.peer >= size) {
    throw Error(std::string(op) + ": rank " + std::to_string(attrs.peer) + " is not in group " +
                std::to_string(attrs.group) + " (size " + std::to_string(size) + ")");
  }
  return attrs;
}

std::string peer_attrs(int peer, Tag tag, int group) {
  return std::to_string(peer) + " " + std::to_string(tag) + " " + std::to_string(group);
}

// The send: its value is x, passed on once x's bytes are sent.
Array send_kernel(std::span<const Array> inputs, std::string_view text) {
  const PeerAttrs attrs = parse_peer_attrs(text, kSend);
  group_at(attrs.group, kSend);  // an unknown group fails here, when the op is built
  const Array& x = inputs[0];
  return make_custom(
      kSend, x.shape(), x.dtype(), {x}, [attrs](std::span<const Array> in, Array& out) {
        const auto bytes =
            std::span(static_cast<const std::byte*>(in[0].raw_data()), in[0].nbytes());
        group_at(attrs.group, kSend)->send_bytes(attrs.peer, attrs.tag, bytes);
        if (!bytes.empty()) std::memcpy(out.raw_mutable_data(), bytes.data(), bytes.size());
      });
}

// The receive: an array shaped like x (whose values are not read), filled
// with the message, which must be exactly that many bytes.
Array recv_like_kernel(std::span<const Array> inputs, std::string_view text) {
  const PeerAttrs attrs = parse_peer_attrs(text, kRecvLike);
  group_at(attrs.group, kRecvLike);  // an unknown group fails here, when the op is built
  const Array& like = inputs[0];
  return make_custom(
      kRecvLike, like.shape(), like.dtype(), {like}, [attrs](std::span<const Array>, Array& out) {
        const auto live = group_at(attrs.group, kRecvLike);
        const std::span into(static_cast<std::byte*>(out.raw_mutable_data()), out.nbytes());
        const std::size_t got = live->recv_bytes_into(attrs.peer, attrs.tag, into);
        if (got != into.size()) {
          throw CollectiveError(ErrorKind::mismatch, live->site(kRecvLike, attrs.peer),
                                "rank " + std::to_string(attrs.peer) + " sent " +
                                    std::to_string(got) + " bytes; the array takes " +
                                    std::to_string(into.size()),
                                "send an array of the receiving array's shape and dtype");
        }
      });
}

Shape peer_shape(std::span<const Shape> inputs, std::string_view text, std::string_view op) {
  parse_peer_attrs(text, op);
  return inputs[0];
}

}  // namespace

void register_point_to_point_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_op_extension({.name = kSend,
                           .num_inputs = 1,
                           .infer_shape = [](std::span<const Shape> in, std::string_view t) {
                             return peer_shape(in, t, kSend);
                           }});
    register_op_extension({.name = kRecvLike,
                           .num_inputs = 1,
                           .infer_shape = [](std::span<const Shape> in, std::string_view t) {
                             return peer_shape(in, t, kRecvLike);
                           }});
    register_array_kernel(kSend, send_kernel);
    register_array_kernel(kRecvLike, recv_like_kernel);
  });
}

Array send(const Array& x, int to, Tag tag, std::shared_ptr<Transport> group) {
  register_point_to_point_ops();
  const Array inputs[] = {x};
  return find_array_kernel(kSend)->operator()(inputs,
                                              peer_attrs(to, tag, group ? group_id(group) : 0));
}

Array recv_like(const Array& like, int from, Tag tag, std::shared_ptr<Transport> group) {
  register_point_to_point_ops();
  const Array inputs[] = {like};
  return find_array_kernel(kRecvLike)->operator()(
      inputs, peer_attrs(from, tag, group ? group_id(group) : 0));
}

}  // namespace rlx::distributed
