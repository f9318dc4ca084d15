#include "bindings/python/group.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "bindings/python/buffers.h"
#include "bindings/python/errors.h"
#include "rlx/init.h"

namespace py = pybind11;

namespace rlx::python {
namespace {

using Access = Buffer::Access;

ReduceOp op_named(const py::object& op) {
  if (py::isinstance<ReduceOp>(op)) return op.cast<ReduceOp>();
  const std::string name = py::str(op);
  if (name == "sum") return ReduceOp::sum;
  if (name == "prod") return ReduceOp::prod;
  if (name == "min") return ReduceOp::min;
  if (name == "max") return ReduceOp::max;
  throw BadArgument{"op '" + name + "' is not a reduction: sum, prod, min, max or rlx.ReduceOp"};
}

// A non-blocking call and what it reads and writes, held until it completes.
class PendingCall {
 public:
  PendingCall() = default;
  PendingCall(const PendingCall&) = delete;
  PendingCall& operator=(const PendingCall&) = delete;
  // A call dropped while it runs is waited for: its buffers are in use.
  ~PendingCall() {
    if (!request_) return;
    py::gil_scoped_release release;
    try {
      request_->wait();
    } catch (...) {  // nobody is left to tell
    }
  }

  Buffer& hold(const py::handle& object, Access access, std::string_view what) {
    buffers_.push_back(std::make_unique<Buffer>(object, access, what));
    return *buffers_.back();
  }
  ElementSpan elements(const py::handle& object, Access access, std::string_view what,
                       std::optional<Dtype> dtype) {
    return hold(object, access, what).elements(dtype);
  }
  // Rooted calls' buffer that only the root uses: None elsewhere.
  ElementSpan optional_elements(const py::object& object, Access access, std::string_view what,
                                std::optional<Dtype> dtype, Dtype fallback) {
    if (object.is_none()) return {nullptr, 0, dtype.value_or(fallback)};
    return elements(object, access, what, dtype);
  }
  std::span<const std::size_t> counts(std::vector<std::size_t> values) {
    counts_.push_back(std::make_unique<std::vector<std::size_t>>(std::move(values)));
    return *counts_.back();
  }
  void started(Request request) { request_ = std::move(request); }

  // Returns the bytes received (irecv), 0 for the others.
  std::size_t wait() {
    if (!request_) return bytes_;
    {
      py::gil_scoped_release release;
      try {
        request_->wait();
      } catch (...) {
        finished();
        throw;
      }
    }
    return finished();
  }
  bool test() {
    if (!request_) return true;
    bool done = false;
    try {
      done = request_->test();
    } catch (...) {
      finished();
      throw;
    }
    if (done) finished();
    return done;
  }

 private:
  std::size_t finished() {
    bytes_ = request_->bytes();
    request_.reset();
    buffers_.clear();  // the objects are free to resize again
    counts_.clear();
    return bytes_;
  }

  std::optional<Request> request_;
  std::size_t bytes_ = 0;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<std::unique_ptr<std::vector<std::size_t>>> counts_;
};

Transport& transport_of(const Group& group) {
  if (!group) throw BadArgument{"this group has been closed"};
  return *group;
}

// Runs `call` on `group`'s transport with the GIL released, so other
// Python threads run while it waits.
template <class Call>
auto released(Call&& call) {
  py::gil_scoped_release release;
  return call();
}

// Starts a non-blocking call: `arguments` holds the buffers, `start` runs
// with the GIL released and returns the Request.
template <class Arguments, class Start>
std::unique_ptr<PendingCall> start(Arguments&& arguments, Start&& start_call) {
  auto pending = std::make_unique<PendingCall>();
  auto spans = arguments(*pending);
  pending->started(released([&] { return start_call(spans); }));
  return pending;
}

std::vector<std::size_t> to_sizes(const std::vector<py::ssize_t>& counts, const char* what) {
  std::vector<std::size_t> sizes;
  sizes.reserve(counts.size());
  for (const py::ssize_t c : counts) {
    if (c < 0) throw BadArgument{std::string(what) + " holds a negative count"};
    sizes.push_back(static_cast<std::size_t>(c));
  }
  return sizes;
}

void define_collectives(py::class_<Group>& group);
void define_nonblocking(py::class_<Group>& group);
void define_point_to_point(py::class_<Group>& group);

}  // namespace

void define_group(py::module_& module) {
  py::enum_<ReduceOp>(module, "ReduceOp", "How a reduction combines elements.")
      .value("SUM", ReduceOp::sum)
      .value("PROD", ReduceOp::prod)
      .value("MIN", ReduceOp::min)
      .value("MAX", ReduceOp::max);

  py::class_<PendingCall>(module, "Request",
                          "A non-blocking call: its buffers stay in use until wait() or a "
                          "test() that returns True.")
      .def("wait", &PendingCall::wait,
           "Blocks (the GIL released) until the call completes; returns the bytes an irecv "
           "received (0 otherwise). Raises the call's error.")
      .def("test", &PendingCall::test,
           "True once the call completed (then its buffers are free); raises its error.");

  py::class_<Group> group(module, "Group",
                          "A group of ranks: what rlx.init() and split() return. Buffers are "
                          "used in place; every call releases the GIL while it waits.");
  group.def_property_readonly("rank", [](const Group& g) { return transport_of(g).rank(); })
      .def_property_readonly("size", [](const Group& g) { return transport_of(g).world_size(); })
      .def_property_readonly("backend",
                             [](const Group& g) { return std::string(transport_of(g).backend()); })
      .def(
          "split",
          [](const Group& g, int color, int key) -> std::optional<Group> {
            Group part = released([&] { return transport_of(g).split(color, key); });
            if (!part) return std::nullopt;
            return part;
          },
          py::arg("color"), py::arg("key") = 0,
          "Ranks with the same color form a new group, ordered by key, then rank; "
          "rlx.NO_COLOR gives None. Every rank of this group calls it.")
      .def("__repr__", [](const Group& g) {
        if (!g) return std::string("<rlx.Group closed>");
        return "<rlx.Group rank " + std::to_string(g.rank()) + " of " + std::to_string(g.size()) +
               " (" + std::string(g.backend()) + ")>";
      });
  define_collectives(group);
  define_nonblocking(group);
  define_point_to_point(group);

  module.attr("NO_COLOR") = kNoColor;
  module.def(
      "init",
      [](const std::string& backend, bool strict) {
        return released([&] { return rlx::init(backend, strict); });
      },
      py::arg("backend") = "any", py::arg("strict") = false,
      "This process's group: the job rlxrun, mpirun, srun or torchrun started it in, or a "
      "group of one without a launcher (an error when strict).");
  module.def(
      "finalize", [] { released([] { rlx::finalize(); }); },
      "Drops rlx's own hold on the process group; it closes when the last Group goes.");
  module.def(
      "is_available",
      [](const std::string& backend) {
        if (backend == "tcp" || backend == "singleton") return true;
        if (backend == "mpi") return is_mpi_built();
        if (backend == "verbs") return is_verbs_built();
        throw BadArgument{"unknown backend '" + backend + "' (tcp, mpi, verbs or singleton)"};
      },
      py::arg("backend"), "True when this build of rlx has the backend.");
}

namespace {

constexpr const char* kRootedDoc = " `root` is a rank of the group.";

void define_collectives(py::class_<Group>& group) {
  const auto no_dtype = py::arg("dtype") = py::none();
  group
      .def(
          "all_reduce",
          [](const Group& g, const py::object& data, const py::object& op,
             const py::object& dtype) {
            PendingCall held;
            const ElementSpan span =
                held.elements(data, Access::write, "all_reduce's data", dtype_named(dtype));
            const ReduceOp how = op_named(op);
            released([&] { transport_of(g).all_reduce(span, how); });
          },
          py::arg("data"), py::arg("op") = "sum", no_dtype,
          "Reduces `data` across every rank, in place.")
      .def(
          "all_sum",
          [](const Group& g, const py::object& data, const py::object& dtype) {
            PendingCall held;
            const ElementSpan span =
                held.elements(data, Access::write, "all_sum's data", dtype_named(dtype));
            released([&] { transport_of(g).all_sum(span); });
          },
          py::arg("data"), no_dtype, "all_reduce with op sum.")
      .def(
          "all_gather",
          [](const Group& g, const py::object& input, const py::object& output,
             const py::object& dtype) {
            PendingCall held;
            const auto type = dtype_named(dtype);
            const ElementSpan in = held.elements(input, Access::read, "all_gather's input", type);
            const ElementSpan out =
                held.elements(output, Access::write, "all_gather's output", type);
            released([&] { transport_of(g).all_gather(in, out); });
          },
          py::arg("input"), py::arg("output"), no_dtype,
          "Every rank's `input`, in rank order, into `output` (size x input's length).")
      .def(
          "reduce_scatter",
          [](const Group& g, const py::object& input, const py::object& output,
             const py::object& op, const py::object& dtype) {
            PendingCall held;
            const auto type = dtype_named(dtype);
            const ElementSpan in =
                held.elements(input, Access::read, "reduce_scatter's input", type);
            const ElementSpan out =
                held.elements(output, Access::write, "reduce_scatter's output", type);
            const ReduceOp how = op_named(op);
            released([&] { transport_of(g).reduce_scatter(in, out, how); });
          },
          py::arg("input"), py::arg("output"), py::arg("op") = "sum", no_dtype,
          "Reduces `input` (size blocks) across ranks; this rank's block into `output`.")
      .def(
          "broadcast",
          [](const Group& g, const py::object& data, int root, const py::object& dtype) {
            PendingCall held;
            const ElementSpan span =
                held.elements(data, Access::write, "broadcast's data", dtype_named(dtype));
            released([&] { transport_of(g).broadcast(span, root); });
          },
          py::arg("data"), py::arg("root"), no_dtype,
          (std::string("The root's `data` into every rank's, in place.") + kRootedDoc).c_str())
      .def(
          "all_to_all",
          [](const Group& g, const py::object& input, const py::object& output,
             const py::object& dtype) {
            PendingCall held;
            const auto type = dtype_named(dtype);
            const ElementSpan in = held.elements(input, Access::read, "all_to_all's input", type);
            const ElementSpan out =
                held.elements(output, Access::write, "all_to_all's output", type);
            released([&] { transport_of(g).all_to_all(in, out); });
          },
          py::arg("input"), py::arg("output"), no_dtype,
          "Block j of `input` to rank j; block i of `output` from rank i.")
      .def(
          "reduce",
          [](const Group& g, const py::object& data, int root, const py::object& op,
             const py::object& dtype) {
            PendingCall held;
            const ElementSpan span =
                held.elements(data, Access::write, "reduce's data", dtype_named(dtype));
            const ReduceOp how = op_named(op);
            released([&] { transport_of(g).reduce(span, how, root); });
          },
          py::arg("data"), py::arg("root"), py::arg("op") = "sum", no_dtype,
          (std::string("Reduces `data` into the root's, in place there.") + kRootedDoc).c_str())
      .def(
          "gather",
          [](const Group& g, const py::object& input, const py::object& output, int root,
             const py::object& dtype) {
            PendingCall held;
            const auto type = dtype_named(dtype);
            const ElementSpan in = held.elements(input, Access::read, "gather's input", type);
            const ElementSpan out =
                held.optional_elements(output, Access::write, "gather's output", type, in.dtype);
            released([&] { transport_of(g).gather(in, out, root); });
          },
          py::arg("input"), py::arg("output"), py::arg("root"), no_dtype,
          "Every rank's `input` into the root's `output` (None on the other ranks).")
      .def(
          "scatter",
          [](const Group& g, const py::object& input, const py::object& output, int root,
             const py::object& dtype) {
            PendingCall held;
            const auto type = dtype_named(dtype);
            const ElementSpan out = held.elements(output, Access::write, "scatter's output", type);
            const ElementSpan in =
                held.optional_elements(input, Access::read, "scatter's input", type, out.dtype);
            released([&] { transport_of(g).scatter(in, out, root); });
          },
          py::arg("input"), py::arg("output"), py::arg("root"), no_dtype,
          "Block i of the root's `input` (None on the other ranks) into rank i's `output`.")
      .def(
          "all_gather_v",
          [](const Group& g, const py::object& input, const py::object& output,
             const std::vector<py::ssize_t>& counts, const py::object& dtype) {
            PendingCall held;
            const auto type = dtype_named(dtype);
            const ElementSpan in = held.elements(input, Access::read, "all_gather_v's input", type);
            const ElementSpan out =
                held.elements(output, Access::write, "all_gather_v's output", type);
            const auto sizes = held.counts(to_sizes(counts, "counts"));
            released([&] { transport_of(g).all_gather_v(in, out, sizes); });
          },
          py::arg("input"), py::arg("output"), py::arg("counts"), no_dtype,
          "Uneven all_gather: rank r gives counts[r] elements.")
      .def(
          "all_to_all_v",
          [](const Group& g, const py::object& input, const std::vector<py::ssize_t>& send_counts,
             const py::object& output, const std::vector<py::ssize_t>& recv_counts,
             const py::object& dtype) {
            PendingCall held;
            const auto type = dtype_named(dtype);
            const ElementSpan in = held.elements(input, Access::read, "all_to_all_v's input", type);
            const ElementSpan out =
                held.elements(output, Access::write, "all_to_all_v's output", type);
            const auto sends = held.counts(to_sizes(send_counts, "send_counts"));
            const auto receives = held.counts(to_sizes(recv_counts, "recv_counts"));
            released([&] { transport_of(g).all_to_all_v(in, sends, out, receives); });
          },
          py::arg("input"), py::arg("send_counts"), py::arg("output"), py::arg("recv_counts"),
          no_dtype, "Uneven all_to_all (MPI_Alltoallv).")
      .def(
          "barrier", [](const Group& g) { released([&] { transport_of(g).barrier(); }); },
          "Returns once every rank of the group called it.");
}

void define_nonblocking(py::class_<Group>& group) {
  const auto no_dtype = py::arg("dtype") = py::none();
  group
      .def(
          "iall_reduce",
          [](const Group& g, const py::object& data, const py::object& op,
             const py::object& dtype) {
            const ReduceOp how = op_named(op);
            return start(
                [&](PendingCall& p) {
                  return p.elements(data, Access::write, "iall_reduce's data", dtype_named(dtype));
                },
                [&](ElementSpan span) { return transport_of(g).iall_reduce(span, how); });
          },
          py::arg("data"), py::arg("op") = "sum", no_dtype, "all_reduce, returning a Request.")
      .def(
          "iall_sum",
          [](const Group& g, const py::object& data, const py::object& dtype) {
            return start(
                [&](PendingCall& p) {
                  return p.elements(data, Access::write, "iall_sum's data", dtype_named(dtype));
                },
                [&](ElementSpan span) { return transport_of(g).iall_sum(span); });
          },
          py::arg("data"), no_dtype, "all_sum, returning a Request.")
      .def(
          "iall_gather",
          [](const Group& g, const py::object& input, const py::object& output,
             const py::object& dtype) {
            return start(
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  return std::pair(p.elements(input, Access::read, "iall_gather's input", type),
                                   p.elements(output, Access::write, "iall_gather's output", type));
                },
                [&](auto spans) { return transport_of(g).iall_gather(spans.first, spans.second); });
          },
          py::arg("input"), py::arg("output"), no_dtype, "all_gather, returning a Request.")
      .def(
          "ireduce_scatter",
          [](const Group& g, const py::object& input, const py::object& output,
             const py::object& op, const py::object& dtype) {
            const ReduceOp how = op_named(op);
            return start(
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  return std::pair(
                      p.elements(input, Access::read, "ireduce_scatter's input", type),
                      p.elements(output, Access::write, "ireduce_scatter's output", type));
                },
                [&](auto spans) {
                  return transport_of(g).ireduce_scatter(spans.first, spans.second, how);
                });
          },
          py::arg("input"), py::arg("output"), py::arg("op") = "sum", no_dtype,
          "reduce_scatter, returning a Request.")
      .def(
          "ibroadcast",
          [](const Group& g, const py::object& data, int root, const py::object& dtype) {
            return start(
                [&](PendingCall& p) {
                  return p.elements(data, Access::write, "ibroadcast's data", dtype_named(dtype));
                },
                [&](ElementSpan span) { return transport_of(g).ibroadcast(span, root); });
          },
          py::arg("data"), py::arg("root"), no_dtype, "broadcast, returning a Request.")
      .def(
          "iall_to_all",
          [](const Group& g, const py::object& input, const py::object& output,
             const py::object& dtype) {
            return start(
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  return std::pair(p.elements(input, Access::read, "iall_to_all's input", type),
                                   p.elements(output, Access::write, "iall_to_all's output", type));
                },
                [&](auto spans) { return transport_of(g).iall_to_all(spans.first, spans.second); });
          },
          py::arg("input"), py::arg("output"), no_dtype, "all_to_all, returning a Request.")
      .def(
          "ireduce",
          [](const Group& g, const py::object& data, int root, const py::object& op,
             const py::object& dtype) {
            const ReduceOp how = op_named(op);
            return start(
                [&](PendingCall& p) {
                  return p.elements(data, Access::write, "ireduce's data", dtype_named(dtype));
                },
                [&](ElementSpan span) { return transport_of(g).ireduce(span, how, root); });
          },
          py::arg("data"), py::arg("root"), py::arg("op") = "sum", no_dtype,
          "reduce, returning a Request.")
      .def(
          "igather",
          [](const Group& g, const py::object& input, const py::object& output, int root,
             const py::object& dtype) {
            return start(
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  const ElementSpan in = p.elements(input, Access::read, "igather's input", type);
                  return std::pair(in, p.optional_elements(output, Access::write,
                                                           "igather's output", type, in.dtype));
                },
                [&](auto spans) {
                  return transport_of(g).igather(spans.first, spans.second, root);
                });
          },
          py::arg("input"), py::arg("output"), py::arg("root"), no_dtype,
          "gather, returning a Request.")
      .def(
          "iscatter",
          [](const Group& g, const py::object& input, const py::object& output, int root,
             const py::object& dtype) {
            return start(
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  const ElementSpan out =
                      p.elements(output, Access::write, "iscatter's output", type);
                  return std::pair(
                      p.optional_elements(input, Access::read, "iscatter's input", type, out.dtype),
                      out);
                },
                [&](auto spans) {
                  return transport_of(g).iscatter(spans.first, spans.second, root);
                });
          },
          py::arg("input"), py::arg("output"), py::arg("root"), no_dtype,
          "scatter, returning a Request.")
      .def(
          "iall_gather_v",
          [](const Group& g, const py::object& input, const py::object& output,
             const std::vector<py::ssize_t>& counts, const py::object& dtype) {
            struct Spans {
              ElementSpan in, out;
              std::span<const std::size_t> counts;
            };
            return start(
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  return Spans{p.elements(input, Access::read, "iall_gather_v's input", type),
                               p.elements(output, Access::write, "iall_gather_v's output", type),
                               p.counts(to_sizes(counts, "counts"))};
                },
                [&](const Spans& s) {
                  return transport_of(g).iall_gather_v(s.in, s.out, s.counts);
                });
          },
          py::arg("input"), py::arg("output"), py::arg("counts"), no_dtype,
          "all_gather_v, returning a Request.")
      .def(
          "iall_to_all_v",
          [](const Group& g, const py::object& input, const std::vector<py::ssize_t>& send_counts,
             const py::object& output, const std::vector<py::ssize_t>& recv_counts,
             const py::object& dtype) {
            struct Spans {
              ElementSpan in;
              std::span<const std::size_t> sends;
              ElementSpan out;
              std::span<const std::size_t> receives;
            };
            return start(
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  return Spans{p.elements(input, Access::read, "iall_to_all_v's input", type),
                               p.counts(to_sizes(send_counts, "send_counts")),
                               p.elements(output, Access::write, "iall_to_all_v's output", type),
                               p.counts(to_sizes(recv_counts, "recv_counts"))};
                },
                [&](const Spans& s) {
                  return transport_of(g).iall_to_all_v(s.in, s.sends, s.out, s.receives);
                });
          },
          py::arg("input"), py::arg("send_counts"), py::arg("output"), py::arg("recv_counts"),
          no_dtype, "all_to_all_v, returning a Request.")
      .def(
          "ibarrier",
          [](const Group& g) {
            return start([](PendingCall&) { return 0; },
                         [&](int) { return transport_of(g).ibarrier(); });
          },
          "barrier, returning a Request.");
}

void define_point_to_point(py::class_<Group>& group) {
  group
      .def(
          "send",
          [](const Group& g, const py::object& data, int to, Tag tag) {
            PendingCall held;
            const auto bytes = held.hold(data, Access::read, "send's data").readable();
            released([&] { transport_of(g).send_bytes(to, tag, bytes); });
          },
          py::arg("data"), py::arg("to"), py::arg("tag") = 0,
          "Sends the bytes of `data` to rank `to`; returns once they are on their way (not "
          "waiting for the receive).")
      .def(
          "recv",
          [](const Group& g, const py::object& into, int source, Tag tag) {
            PendingCall held;
            const auto bytes = held.hold(into, Access::write, "recv's buffer").writable();
            return released([&] { return transport_of(g).recv_bytes_into(source, tag, bytes); });
          },
          py::arg("into"), py::arg("source"), py::arg("tag") = 0,
          "Receives the next message of `tag` from `source` into `into`; returns its length. "
          "A longer message is an InvalidArgumentError.")
      .def(
          "recv_bytes",
          [](const Group& g, int source, Tag tag) {
            const std::vector<std::byte> message =
                released([&] { return transport_of(g).recv_bytes(source, tag); });
            return py::bytes(reinterpret_cast<const char*>(message.data()), message.size());
          },
          py::arg("source"), py::arg("tag") = 0,
          "Receives the next message of `tag` from `source`, of any length, as bytes.")
      .def(
          "isend",
          [](const Group& g, const py::object& data, int to, Tag tag) {
            return start(
                [&](PendingCall& p) {
                  return p.hold(data, Access::read, "isend's data").readable();
                },
                [&](std::span<const std::byte> bytes) {
                  return transport_of(g).isend(to, tag, bytes);
                });
          },
          py::arg("data"), py::arg("to"), py::arg("tag") = 0, "send, returning a Request.")
      .def(
          "irecv",
          [](const Group& g, const py::object& into, int source, Tag tag) {
            return start(
                [&](PendingCall& p) {
                  return p.hold(into, Access::write, "irecv's buffer").writable();
                },
                [&](std::span<std::byte> bytes) {
                  return transport_of(g).irecv(source, tag, bytes);
                });
          },
          py::arg("into"), py::arg("source"), py::arg("tag") = 0,
          "recv, returning a Request whose wait() gives the message's length.");
}

}  // namespace
}  // namespace rlx::python
