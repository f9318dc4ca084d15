// The C API (rlx/rlx_c.h) over the C++ one: handles own an rlx::Group or an
// rlx::Request, and every exception becomes a status and this thread's last
// error.
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <new>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "rlx/init.h"
#include "rlx/rlx_c.h"

struct rlx_group {
  rlx::Group group;
};

struct rlx_request {
  rlx::Request request;
};

namespace rlx {
namespace {

thread_local std::string last_error;
thread_local int last_error_peer = -1;

rlx_status status_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::timeout:
      return RLX_ERR_TIMEOUT;
    case ErrorKind::peer_lost:
      return RLX_ERR_PEER_LOST;
    case ErrorKind::protocol_violation:
      return RLX_ERR_PROTOCOL_VIOLATION;
    case ErrorKind::mismatch:
      return RLX_ERR_MISMATCH;
    case ErrorKind::invalid_argument:
      return RLX_ERR_INVALID_ARGUMENT;
    case ErrorKind::backend_unavailable:
      return RLX_ERR_BACKEND_UNAVAILABLE;
    case ErrorKind::resource_exhausted:
      return RLX_ERR_RESOURCE_EXHAUSTED;
  }
  return RLX_ERR_INTERNAL;
}

rlx_status failed(rlx_status status, std::string text, int peer = -1) {
  last_error = std::move(text);
  last_error_peer = peer;
  return status;
}

// An argument the C++ API cannot see is wrong (a null handle or out-pointer).
struct BadArgument {
  std::string text;
};

// Runs `call`, the C function `function`'s body: every failure becomes its
// status and this thread's last error, nothing escapes into C.
template <class Call>
rlx_status guarded(const char* function, Call&& call) noexcept {
  try {
    call();
    last_error.clear();
    last_error_peer = -1;
    return RLX_OK;
  } catch (const CollectiveError& error) {
    return failed(status_of(error.kind()), error.what(), error.peer());
  } catch (const BadArgument& bad) {
    return failed(RLX_ERR_INVALID_ARGUMENT, std::string(function) + ": " + bad.text);
  } catch (const std::bad_alloc&) {
    return failed(RLX_ERR_RESOURCE_EXHAUSTED, std::string(function) + ": out of memory");
  } catch (const Error& error) {  // rlx's own, outside the transport: a bad argument
    return failed(RLX_ERR_INVALID_ARGUMENT, std::string(function) + ": " + error.what());
  } catch (const std::exception& error) {
    return failed(RLX_ERR_INTERNAL, std::string(function) + ": " + error.what());
  } catch (...) {
    return failed(RLX_ERR_INTERNAL, std::string(function) + ": an unknown exception");
  }
}

template <class T>
T& required(T* pointer, const char* what) {
  if (pointer == nullptr) throw BadArgument{std::string(what) + " is NULL"};
  return *pointer;
}

const char* required_text(const char* text, const char* what) { return &required(text, what); }

Transport& transport_of(const rlx_group* group) {
  const Group& g = required(group, "the group").group;
  if (!g) throw BadArgument{"the group handle holds no group"};
  return *g;
}

// The enums' values are checked here: the C++ ones are 8 bits wide, so a
// cast alone would turn 256 into f32 or sum.
Dtype dtype_of(rlx_dtype dtype) {
  const int value = dtype;
  if (value < RLX_F32 || value > RLX_BOOL) {
    throw BadArgument{"dtype value " + std::to_string(value) + " is not an rlx_dtype"};
  }
  return static_cast<Dtype>(value);
}
ReduceOp op_of(rlx_op op) {
  const int value = op;
  if (value < RLX_SUM || value > RLX_MAX) {
    throw BadArgument{"reduce op value " + std::to_string(value) + " is not an rlx_op"};
  }
  return static_cast<ReduceOp>(value);
}

// size x count elements, for the buffers that hold a block per rank.
std::size_t blocks(const Transport& t, std::size_t count) {
  std::size_t total = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(t.world_size()), count, &total)) {
    throw BadArgument{std::to_string(t.world_size()) + " blocks of " + std::to_string(count) +
                      " elements do not fit in size_t"};
  }
  return total;
}

std::span<const std::size_t> counts_of(const Transport& t, const std::size_t* counts,
                                       const char* what) {
  return {&required(counts, what), static_cast<std::size_t>(t.world_size())};
}

// The sum of `counts` (the C++ call checks that it fits; a wrapped sum only
// makes the buffer look too small there).
std::size_t total_of(std::span<const std::size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), std::size_t{0});
}

ElementSpan span(void* data, std::size_t count, rlx_dtype dtype) {
  return {data, count, dtype_of(dtype)};
}
ConstElementSpan const_span(const void* data, std::size_t count, rlx_dtype dtype) {
  return {data, count, dtype_of(dtype)};
}

// Rooted calls: the buffer only the root uses is size x count there, and
// may be NULL (no elements) elsewhere.
ElementSpan root_blocks(const Transport& t, void* data, std::size_t count, rlx_dtype dtype) {
  return span(data, data == nullptr ? 0 : blocks(t, count), dtype);
}
ConstElementSpan const_root_blocks(const Transport& t, const void* data, std::size_t count,
                                   rlx_dtype dtype) {
  return const_span(data, data == nullptr ? 0 : blocks(t, count), dtype);
}

// Runs a non-blocking call and hands its request to the caller.
template <class Start>
rlx_status started(const char* function, rlx_request** request, Start&& start) {
  return guarded(function, [&] {
    rlx_request*& out = required(request, "the request pointer");
    out = nullptr;
    // The handle first: once started, the operation must have one.
    auto handle = std::make_unique<rlx_request>();
    handle->request = start();
    out = handle.release();
  });
}

rlx_status finish(rlx_request** request, std::size_t* bytes, bool block, int* done) {
  return guarded(block ? "rlx_wait" : "rlx_test", [&] {
    rlx_request*& handle = required(request, "the request pointer");
    if (!block) required(done, "the done pointer");
    if (bytes != nullptr) *bytes = 0;
    if (done != nullptr) *done = 0;
    if (handle == nullptr) {
      if (done != nullptr) *done = 1;
      return;
    }
    // Released once complete, failed or not, as MPI_Wait does.
    const auto release = [&handle] {
      delete handle;
      handle = nullptr;
    };
    try {
      if (block) {
        handle->request.wait();
      } else if (!handle->request.test()) {
        return;
      }
    } catch (...) {
      if (done != nullptr) *done = 1;  // complete, as a failure (MPI_Test's rule)
      release();
      throw;
    }
    if (done != nullptr) *done = 1;
    if (bytes != nullptr) *bytes = handle->request.bytes();
    release();
  });
}

}  // namespace
}  // namespace rlx

using rlx::BadArgument;
using rlx::blocks;
using rlx::const_root_blocks;
using rlx::const_span;
using rlx::counts_of;
using rlx::guarded;
using rlx::op_of;
using rlx::required;
using rlx::required_text;
using rlx::root_blocks;
using rlx::span;
using rlx::started;
using rlx::total_of;
using rlx::transport_of;

extern "C" {

const char* rlx_version(void) { return RLX_VERSION_STRING; }
const char* rlx_last_error(void) { return rlx::last_error.c_str(); }
int rlx_last_error_peer(void) { return rlx::last_error_peer; }

const char* rlx_status_name(rlx_status status) {
  const int value = status;
  if (value == RLX_OK) return "ok";
  if (value == RLX_ERR_INTERNAL) return "internal";
  if (value < RLX_OK || value > RLX_ERR_INTERNAL) return "not an rlx_status";
  return rlx::id_of(static_cast<rlx::ErrorKind>(value - 1)).data();
}
// rlx_status_name's arithmetic: the failure statuses follow the kinds, in order.
static_assert(RLX_ERR_TIMEOUT == static_cast<int>(rlx::ErrorKind::timeout) + 1);
static_assert(RLX_ERR_RESOURCE_EXHAUSTED ==
              static_cast<int>(rlx::ErrorKind::resource_exhausted) + 1);

size_t rlx_dtype_size(rlx_dtype dtype) {
  const int value = dtype;
  if (value < RLX_F32 || value > RLX_BOOL) return 0;
  return rlx::size_of(static_cast<rlx::Dtype>(value));
}

rlx_status rlx_is_available(const char* backend, int* available) {
  return guarded("rlx_is_available", [&] {
    const char* name = required_text(backend, "the backend name");
    required(available, "the result pointer") = rlx::is_backend_built(name) ? 1 : 0;
  });
}

rlx_status rlx_init(const char* backend, int strict, rlx_group** world) {
  return guarded("rlx_init", [&] {
    rlx_group*& out = required(world, "the group pointer");
    out = nullptr;
    rlx::Group group = rlx::init(required_text(backend, "the backend name"), strict != 0);
    out = new rlx_group{std::move(group)};
  });
}

rlx_status rlx_finalize(void) {
  return guarded("rlx_finalize", [] { rlx::finalize(); });
}

rlx_status rlx_group_free(rlx_group* group) {
  return guarded("rlx_group_free", [&] { delete group; });
}

rlx_status rlx_rank(const rlx_group* group, int* rank) {
  return guarded("rlx_rank",
                 [&] { required(rank, "the result pointer") = transport_of(group).rank(); });
}

rlx_status rlx_size(const rlx_group* group, int* size) {
  return guarded("rlx_size",
                 [&] { required(size, "the result pointer") = transport_of(group).world_size(); });
}

rlx_status rlx_backend(const rlx_group* group, const char** name) {
  return guarded("rlx_backend", [&] {
    const std::string_view backend = transport_of(group).backend();
    const char*& out = required(name, "the result pointer");
    out = "unknown";
    for (const char* known : {"singleton", "tcp", "mpi", "verbs"}) {
      if (backend == known) out = known;
    }
  });
}

rlx_status rlx_split(rlx_group* group, int color, int key, rlx_group** out) {
  return guarded("rlx_split", [&] {
    rlx_group*& result = required(out, "the group pointer");
    result = nullptr;
    rlx::Group part = transport_of(group).split(color, key);
    if (part) result = new rlx_group{std::move(part)};
  });
}

rlx_status rlx_send(rlx_group* group, int to, uint32_t tag, const void* data, size_t bytes) {
  return guarded("rlx_send", [&] {
    transport_of(group).send_bytes(to, tag, {static_cast<const std::byte*>(data), bytes});
  });
}

rlx_status rlx_recv(rlx_group* group, int from, uint32_t tag, void* buffer, size_t capacity,
                    size_t* received) {
  return guarded("rlx_recv", [&] {
    const std::size_t length =
        transport_of(group).recv_bytes_into(from, tag, {static_cast<std::byte*>(buffer), capacity});
    if (received != nullptr) *received = length;
  });
}

rlx_status rlx_recv_message(rlx_group* group, int from, uint32_t tag, void** data, size_t* bytes) {
  return guarded("rlx_recv_message", [&] {
    void*& out = required(data, "the data pointer");
    std::size_t& length = required(bytes, "the length pointer");
    out = nullptr;
    length = 0;
    const std::vector<std::byte> message = transport_of(group).recv_bytes(from, tag);
    if (message.empty()) return;
    out = std::malloc(message.size());
    if (out == nullptr) throw std::bad_alloc();
    std::memcpy(out, message.data(), message.size());
    length = message.size();
  });
}

rlx_status rlx_isend(rlx_group* group, int to, uint32_t tag, const void* data, size_t bytes,
                     rlx_request** request) {
  return started("rlx_isend", request, [&] {
    return transport_of(group).isend(to, tag, {static_cast<const std::byte*>(data), bytes});
  });
}

rlx_status rlx_irecv(rlx_group* group, int from, uint32_t tag, void* buffer, size_t capacity,
                     rlx_request** request) {
  return started("rlx_irecv", request, [&] {
    return transport_of(group).irecv(from, tag, {static_cast<std::byte*>(buffer), capacity});
  });
}

rlx_status rlx_wait(rlx_request** request, size_t* bytes) {
  return rlx::finish(request, bytes, /*block=*/true, nullptr);
}

rlx_status rlx_test(rlx_request** request, int* done, size_t* bytes) {
  return rlx::finish(request, bytes, /*block=*/false, done);
}

// Collectives, blocking then non-blocking; the C++ calls check the rest.

rlx_status rlx_all_reduce(rlx_group* group, void* data, size_t count, rlx_dtype dtype, rlx_op op) {
  return guarded("rlx_all_reduce",
                 [&] { transport_of(group).all_reduce(span(data, count, dtype), op_of(op)); });
}

rlx_status rlx_all_gather(rlx_group* group, const void* input, void* output, size_t count,
                          rlx_dtype dtype) {
  return guarded("rlx_all_gather", [&] {
    rlx::Transport& t = transport_of(group);
    t.all_gather(const_span(input, count, dtype), span(output, blocks(t, count), dtype));
  });
}

rlx_status rlx_reduce_scatter(rlx_group* group, const void* input, void* output, size_t count,
                              rlx_dtype dtype, rlx_op op) {
  return guarded("rlx_reduce_scatter", [&] {
    rlx::Transport& t = transport_of(group);
    t.reduce_scatter(const_span(input, blocks(t, count), dtype), span(output, count, dtype),
                     op_of(op));
  });
}

rlx_status rlx_broadcast(rlx_group* group, void* data, size_t count, rlx_dtype dtype, int root) {
  return guarded("rlx_broadcast",
                 [&] { transport_of(group).broadcast(span(data, count, dtype), root); });
}

rlx_status rlx_all_to_all(rlx_group* group, const void* input, void* output, size_t count,
                          rlx_dtype dtype) {
  return guarded("rlx_all_to_all", [&] {
    rlx::Transport& t = transport_of(group);
    const std::size_t total = blocks(t, count);
    t.all_to_all(const_span(input, total, dtype), span(output, total, dtype));
  });
}

rlx_status rlx_reduce(rlx_group* group, void* data, size_t count, rlx_dtype dtype, rlx_op op,
                      int root) {
  return guarded("rlx_reduce",
                 [&] { transport_of(group).reduce(span(data, count, dtype), op_of(op), root); });
}

rlx_status rlx_gather(rlx_group* group, const void* input, void* output, size_t count,
                      rlx_dtype dtype, int root) {
  return guarded("rlx_gather", [&] {
    rlx::Transport& t = transport_of(group);
    t.gather(const_span(input, count, dtype), root_blocks(t, output, count, dtype), root);
  });
}

rlx_status rlx_scatter(rlx_group* group, const void* input, void* output, size_t count,
                       rlx_dtype dtype, int root) {
  return guarded("rlx_scatter", [&] {
    rlx::Transport& t = transport_of(group);
    t.scatter(const_root_blocks(t, input, count, dtype), span(output, count, dtype), root);
  });
}

rlx_status rlx_all_gather_v(rlx_group* group, const void* input, void* output, const size_t* counts,
                            rlx_dtype dtype) {
  return guarded("rlx_all_gather_v", [&] {
    rlx::Transport& t = transport_of(group);
    const auto sizes = counts_of(t, counts, "counts");
    t.all_gather_v(const_span(input, sizes[static_cast<std::size_t>(t.rank())], dtype),
                   span(output, total_of(sizes), dtype), sizes);
  });
}

rlx_status rlx_all_to_all_v(rlx_group* group, const void* input, const size_t* send_counts,
                            void* output, const size_t* recv_counts, rlx_dtype dtype) {
  return guarded("rlx_all_to_all_v", [&] {
    rlx::Transport& t = transport_of(group);
    const auto sends = counts_of(t, send_counts, "send_counts");
    const auto receives = counts_of(t, recv_counts, "recv_counts");
    t.all_to_all_v(const_span(input, total_of(sends), dtype), sends,
                   span(output, total_of(receives), dtype), receives);
  });
}

rlx_status rlx_barrier(rlx_group* group) {
  return guarded("rlx_barrier", [&] { transport_of(group).barrier(); });
}

rlx_status rlx_iall_reduce(rlx_group* group, void* data, size_t count, rlx_dtype dtype, rlx_op op,
                           rlx_request** request) {
  return started("rlx_iall_reduce", request, [&] {
    return transport_of(group).iall_reduce(span(data, count, dtype), op_of(op));
  });
}

rlx_status rlx_iall_gather(rlx_group* group, const void* input, void* output, size_t count,
                           rlx_dtype dtype, rlx_request** request) {
  return started("rlx_iall_gather", request, [&] {
    rlx::Transport& t = transport_of(group);
    return t.iall_gather(const_span(input, count, dtype), span(output, blocks(t, count), dtype));
  });
}

rlx_status rlx_ireduce_scatter(rlx_group* group, const void* input, void* output, size_t count,
                               rlx_dtype dtype, rlx_op op, rlx_request** request) {
  return started("rlx_ireduce_scatter", request, [&] {
    rlx::Transport& t = transport_of(group);
    return t.ireduce_scatter(const_span(input, blocks(t, count), dtype), span(output, count, dtype),
                             op_of(op));
  });
}

rlx_status rlx_ibroadcast(rlx_group* group, void* data, size_t count, rlx_dtype dtype, int root,
                          rlx_request** request) {
  return started("rlx_ibroadcast", request,
                 [&] { return transport_of(group).ibroadcast(span(data, count, dtype), root); });
}

rlx_status rlx_iall_to_all(rlx_group* group, const void* input, void* output, size_t count,
                           rlx_dtype dtype, rlx_request** request) {
  return started("rlx_iall_to_all", request, [&] {
    rlx::Transport& t = transport_of(group);
    const std::size_t total = blocks(t, count);
    return t.iall_to_all(const_span(input, total, dtype), span(output, total, dtype));
  });
}

rlx_status rlx_ireduce(rlx_group* group, void* data, size_t count, rlx_dtype dtype, rlx_op op,
                       int root, rlx_request** request) {
  return started("rlx_ireduce", request, [&] {
    return transport_of(group).ireduce(span(data, count, dtype), op_of(op), root);
  });
}

rlx_status rlx_igather(rlx_group* group, const void* input, void* output, size_t count,
                       rlx_dtype dtype, int root, rlx_request** request) {
  return started("rlx_igather", request, [&] {
    rlx::Transport& t = transport_of(group);
    return t.igather(const_span(input, count, dtype), root_blocks(t, output, count, dtype), root);
  });
}

rlx_status rlx_iscatter(rlx_group* group, const void* input, void* output, size_t count,
                        rlx_dtype dtype, int root, rlx_request** request) {
  return started("rlx_iscatter", request, [&] {
    rlx::Transport& t = transport_of(group);
    return t.iscatter(const_root_blocks(t, input, count, dtype), span(output, count, dtype), root);
  });
}

rlx_status rlx_iall_gather_v(rlx_group* group, const void* input, void* output,
                             const size_t* counts, rlx_dtype dtype, rlx_request** request) {
  return started("rlx_iall_gather_v", request, [&] {
    rlx::Transport& t = transport_of(group);
    const auto sizes = counts_of(t, counts, "counts");
    return t.iall_gather_v(const_span(input, sizes[static_cast<std::size_t>(t.rank())], dtype),
                           span(output, total_of(sizes), dtype), sizes);
  });
}

rlx_status rlx_iall_to_all_v(rlx_group* group, const void* input, const size_t* send_counts,
                             void* output, const size_t* recv_counts, rlx_dtype dtype,
                             rlx_request** request) {
  return started("rlx_iall_to_all_v", request, [&] {
    rlx::Transport& t = transport_of(group);
    const auto sends = counts_of(t, send_counts, "send_counts");
    const auto receives = counts_of(t, recv_counts, "recv_counts");
    return t.iall_to_all_v(const_span(input, total_of(sends), dtype), sends,
                           span(output, total_of(receives), dtype), receives);
  });
}

rlx_status rlx_ibarrier(rlx_group* group, rlx_request** request) {
  return started("rlx_ibarrier", request, [&] { return transport_of(group).ibarrier(); });
}

}  // extern "C"
