#include "bindings/python/group.h"

#include <climits>
#include <cstdint>
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

// The Group Python holds. Closing a transport waits for its peers, so the
// last handle goes with the GIL released.
struct PyGroup {
  Group group;
  PyGroup() = default;
  PyGroup(const PyGroup&) = delete;
  PyGroup& operator=(const PyGroup&) = delete;
  ~PyGroup() { drop_released(group); }
  static void drop_released(Group& group) {
    if (!group) return;
    py::gil_scoped_release release;
    group = Group();
  }
};

Transport& transport_of(const PyGroup& g) {
  if (!g.group) throw BadArgument{"this group has been closed"};
  return *g.group;
}

// Runs `call` with the GIL released, so other Python threads run while it
// waits.
template <class Call>
auto released(Call&& call) {
  py::gil_scoped_release release;
  return call();
}

// What a call reads and writes (and its group), held until it completed.
struct HeldArguments {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::unique_ptr<std::vector<std::size_t>>> counts;
  Group group;
};

// Non-blocking calls dropped before they completed, with what they use:
// kept until they complete, and never freed at exit (the transport may
// still write into their buffers then). Touched with the GIL held.
struct Orphan {
  Request request;
  HeldArguments held;
};
std::vector<Orphan>& orphans() {
  static auto* list = new std::vector<Orphan>();
  return *list;
}
void reap_orphans() {
  auto& list = orphans();
  for (std::size_t i = 0; i < list.size();) {
    bool done = true;
    try {
      const Request request = list[i].request;
      done = released([&] { return request.test(); });
    } catch (...) {  // complete, as a failure nobody is left to hear
    }
    if (!done) {
      ++i;
      continue;
    }
    PyGroup::drop_released(list[i].held.group);
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// A non-blocking call (rlx.Request). Copies of an rlx::Request share one
// operation: each wait and test works on its own copy, so threads that
// wait for the same Request at once each see it complete.
class PendingCall {
 public:
  explicit PendingCall(const PyGroup& group) {
    reap_orphans();
    held_.group = group.group;
  }
  PendingCall(const PendingCall&) = delete;
  PendingCall& operator=(const PendingCall&) = delete;
  // Dropped unfinished, the call runs on: an orphan keeps what it uses.
  ~PendingCall() {
    if (request_) {
      orphans().push_back({*request_, std::move(held_)});
    } else {
      PyGroup::drop_released(held_.group);
    }
  }

  Buffer& hold(const py::handle& object, Access access, std::string_view what) {
    held_.buffers.push_back(std::make_unique<Buffer>(object, access, what));
    return *held_.buffers.back();
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
    held_.counts.push_back(std::make_unique<std::vector<std::size_t>>(std::move(values)));
    return *held_.counts.back();
  }
  void started(Request request) { request_ = std::move(request); }

  // Returns the bytes an irecv received (0 for the others); raises the
  // call's error, every time it is asked.
  std::size_t wait() {
    if (request_) {
      const Request request = *request_;
      std::exception_ptr failure;
      released([&] {
        try {
          request.wait();
        } catch (...) {
          failure = std::current_exception();
        }
      });
      finish(request, failure);  // the GIL is back: buffers are released with it
    }
    if (failure_) std::rethrow_exception(failure_);
    return bytes_;
  }
  bool test() {
    if (request_) {
      const Request request = *request_;
      std::exception_ptr failure;
      const bool done = released([&] {
        try {
          return request.test();
        } catch (...) {
          failure = std::current_exception();
          return true;
        }
      });
      if (!done) return false;
      finish(request, failure);
    }
    if (failure_) std::rethrow_exception(failure_);
    return true;
  }

 private:
  void finish(const Request& request, std::exception_ptr failure) {
    if (!request_) return;  // another thread's wait or test finished it
    failure_ = failure;
    bytes_ = failure ? 0 : request.bytes();
    request_.reset();
    held_.buffers.clear();  // the objects are free to resize again
    held_.counts.clear();
    PyGroup::drop_released(held_.group);
  }

  std::optional<Request> request_;
  std::exception_ptr failure_;
  std::size_t bytes_ = 0;
  HeldArguments held_;
};

// Starts a non-blocking call on `g`: `arguments` holds the buffers, `start`
// runs with the GIL released and returns the Request.
template <class Arguments, class Start>
std::unique_ptr<PendingCall> start(const PyGroup& g, Arguments&& arguments, Start&& start_call) {
  auto pending = std::make_unique<PendingCall>(g);
  auto spans = arguments(*pending);
  pending->started(released([&] { return start_call(spans); }));
  return pending;
}

// Python ints as the C++ call's: out of range is an invalid argument, not
// pybind11's "incompatible function arguments".
int rank_of(long long value, const char* what) {
  if (value < INT_MIN || value > INT_MAX) {
    throw BadArgument{std::string(what) + " " + std::to_string(value) + " is not a rank"};
  }
  return static_cast<int>(value);
}
Tag tag_of(long long value) {
  if (value < 0 || value > static_cast<long long>(UINT32_MAX)) {
    throw BadArgument{"tag " + std::to_string(value) + " is not a tag (0 and up)"};
  }
  return static_cast<Tag>(value);
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

void define_collectives(py::class_<PyGroup>& group);
void define_nonblocking(py::class_<PyGroup>& group);
void define_point_to_point(py::class_<PyGroup>& group);

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

  py::class_<PyGroup> group(module, "Group",
                            "A group of ranks: what rlx.init() and split() return. Buffers are "
                            "used in place; every call releases the GIL while it waits.");
  group.def_property_readonly("rank", [](const PyGroup& g) { return transport_of(g).rank(); })
      .def_property_readonly("size", [](const PyGroup& g) { return transport_of(g).world_size(); })
      .def_property_readonly(
          "backend", [](const PyGroup& g) { return std::string(transport_of(g).backend()); })
      .def(
          "split",
          [](const PyGroup& g, long long color, long long key) -> std::unique_ptr<PyGroup> {
            const int c = rank_of(color, "color"), k = rank_of(key, "key");
            Group part = released([&] { return transport_of(g).split(c, k); });
            if (!part) return nullptr;
            auto held = std::make_unique<PyGroup>();
            held->group = std::move(part);
            return held;
          },
          py::arg("color"), py::arg("key") = 0,
          "Ranks with the same color form a new group, ordered by key, then rank; "
          "rlx.NO_COLOR gives None. Every rank of this group calls it.")
      .def("__repr__", [](const PyGroup& g) {
        if (!g.group) return std::string("<rlx.Group closed>");
        return "<rlx.Group rank " + std::to_string(g.group.rank()) + " of " +
               std::to_string(g.group.size()) + " (" + std::string(g.group.backend()) + ")>";
      });
  define_collectives(group);
  define_nonblocking(group);
  define_point_to_point(group);

  module.attr("NO_COLOR") = kNoColor;
  module.def(
      "init",
      [](const std::string& backend, bool strict) {
        auto held = std::make_unique<PyGroup>();
        held->group = released([&] { return rlx::init(backend, strict); });
        return held;
      },
      py::arg("backend") = "any", py::arg("strict") = false,
      "This process's group: the job rlxrun, mpirun, srun or torchrun started it in, or a "
      "group of one without a launcher (an error when strict).");
  module.def(
      "finalize", [] { released([] { rlx::finalize(); }); },
      "Drops rlx's own hold on the process group; it closes when the last Group goes.");
  module.def("is_available", &is_backend_built, py::arg("backend"),
             "True when this build of rlx has the backend.");
}

namespace {

constexpr const char* kRootedDoc = " `root` is a rank of the group.";

void define_collectives(py::class_<PyGroup>& group) {
  const auto no_dtype = py::arg("dtype") = py::none();
  group
      .def(
          "all_reduce",
          [](const PyGroup& g, const py::object& data, const py::object& op,
             const py::object& dtype) {
            PendingCall held(g);
            const ElementSpan span =
                held.elements(data, Access::write, "all_reduce's data", dtype_named(dtype));
            const ReduceOp how = op_named(op);
            released([&] { transport_of(g).all_reduce(span, how); });
          },
          py::arg("data"), py::arg("op") = "sum", no_dtype,
          "Reduces `data` across every rank, in place.")
      .def(
          "all_sum",
          [](const PyGroup& g, const py::object& data, const py::object& dtype) {
            PendingCall held(g);
            const ElementSpan span =
                held.elements(data, Access::write, "all_sum's data", dtype_named(dtype));
            released([&] { transport_of(g).all_sum(span); });
          },
          py::arg("data"), no_dtype, "all_reduce with op sum.")
      .def(
          "all_gather",
          [](const PyGroup& g, const py::object& input, const py::object& output,
             const py::object& dtype) {
            PendingCall held(g);
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
          [](const PyGroup& g, const py::object& input, const py::object& output,
             const py::object& op, const py::object& dtype) {
            PendingCall held(g);
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
          [](const PyGroup& g, const py::object& data, long long root, const py::object& dtype) {
            PendingCall held(g);
            const ElementSpan span =
                held.elements(data, Access::write, "broadcast's data", dtype_named(dtype));
            released([&] { transport_of(g).broadcast(span, rank_of(root, "root")); });
          },
          py::arg("data"), py::arg("root"), no_dtype,
          (std::string("The root's `data` into every rank's, in place.") + kRootedDoc).c_str())
      .def(
          "all_to_all",
          [](const PyGroup& g, const py::object& input, const py::object& output,
             const py::object& dtype) {
            PendingCall held(g);
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
          [](const PyGroup& g, const py::object& data, long long root, const py::object& op,
             const py::object& dtype) {
            PendingCall held(g);
            const ElementSpan span =
                held.elements(data, Access::write, "reduce's data", dtype_named(dtype));
            const ReduceOp how = op_named(op);
            released([&] { transport_of(g).reduce(span, how, rank_of(root, "root")); });
          },
          py::arg("data"), py::arg("root"), py::arg("op") = "sum", no_dtype,
          (std::string("Reduces `data` into the root's, in place there.") + kRootedDoc).c_str())
      .def(
          "gather",
          [](const PyGroup& g, const py::object& input, const py::object& output, long long root,
             const py::object& dtype) {
            PendingCall held(g);
            const auto type = dtype_named(dtype);
            const ElementSpan in = held.elements(input, Access::read, "gather's input", type);
            const ElementSpan out =
                held.optional_elements(output, Access::write, "gather's output", type, in.dtype);
            released([&] { transport_of(g).gather(in, out, rank_of(root, "root")); });
          },
          py::arg("input"), py::arg("output"), py::arg("root"), no_dtype,
          "Every rank's `input` into the root's `output` (None on the other ranks).")
      .def(
          "scatter",
          [](const PyGroup& g, const py::object& input, const py::object& output, long long root,
             const py::object& dtype) {
            PendingCall held(g);
            const auto type = dtype_named(dtype);
            const ElementSpan out = held.elements(output, Access::write, "scatter's output", type);
            const ElementSpan in =
                held.optional_elements(input, Access::read, "scatter's input", type, out.dtype);
            released([&] { transport_of(g).scatter(in, out, rank_of(root, "root")); });
          },
          py::arg("input"), py::arg("output"), py::arg("root"), no_dtype,
          "Block i of the root's `input` (None on the other ranks) into rank i's `output`.")
      .def(
          "all_gather_v",
          [](const PyGroup& g, const py::object& input, const py::object& output,
             const std::vector<py::ssize_t>& counts, const py::object& dtype) {
            PendingCall held(g);
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
          [](const PyGroup& g, const py::object& input, const std::vector<py::ssize_t>& send_counts,
             const py::object& output, const std::vector<py::ssize_t>& recv_counts,
             const py::object& dtype) {
            PendingCall held(g);
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
          "barrier", [](const PyGroup& g) { released([&] { transport_of(g).barrier(); }); },
          "Returns once every rank of the group called it.");
}

void define_nonblocking(py::class_<PyGroup>& group) {
  const auto no_dtype = py::arg("dtype") = py::none();
  group
      .def(
          "iall_reduce",
          [](const PyGroup& g, const py::object& data, const py::object& op,
             const py::object& dtype) {
            const ReduceOp how = op_named(op);
            return start(
                g,
                [&](PendingCall& p) {
                  return p.elements(data, Access::write, "iall_reduce's data", dtype_named(dtype));
                },
                [&](ElementSpan span) { return transport_of(g).iall_reduce(span, how); });
          },
          py::arg("data"), py::arg("op") = "sum", no_dtype, "all_reduce, returning a Request.")
      .def(
          "iall_sum",
          [](const PyGroup& g, const py::object& data, const py::object& dtype) {
            return start(
                g,
                [&](PendingCall& p) {
                  return p.elements(data, Access::write, "iall_sum's data", dtype_named(dtype));
                },
                [&](ElementSpan span) { return transport_of(g).iall_sum(span); });
          },
          py::arg("data"), no_dtype, "all_sum, returning a Request.")
      .def(
          "iall_gather",
          [](const PyGroup& g, const py::object& input, const py::object& output,
             const py::object& dtype) {
            return start(
                g,
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
          [](const PyGroup& g, const py::object& input, const py::object& output,
             const py::object& op, const py::object& dtype) {
            const ReduceOp how = op_named(op);
            return start(
                g,
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
          [](const PyGroup& g, const py::object& data, long long root, const py::object& dtype) {
            return start(
                g,
                [&](PendingCall& p) {
                  return p.elements(data, Access::write, "ibroadcast's data", dtype_named(dtype));
                },
                [&](ElementSpan span) {
                  return transport_of(g).ibroadcast(span, rank_of(root, "root"));
                });
          },
          py::arg("data"), py::arg("root"), no_dtype, "broadcast, returning a Request.")
      .def(
          "iall_to_all",
          [](const PyGroup& g, const py::object& input, const py::object& output,
             const py::object& dtype) {
            return start(
                g,
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
          [](const PyGroup& g, const py::object& data, long long root, const py::object& op,
             const py::object& dtype) {
            const ReduceOp how = op_named(op);
            return start(
                g,
                [&](PendingCall& p) {
                  return p.elements(data, Access::write, "ireduce's data", dtype_named(dtype));
                },
                [&](ElementSpan span) {
                  return transport_of(g).ireduce(span, how, rank_of(root, "root"));
                });
          },
          py::arg("data"), py::arg("root"), py::arg("op") = "sum", no_dtype,
          "reduce, returning a Request.")
      .def(
          "igather",
          [](const PyGroup& g, const py::object& input, const py::object& output, long long root,
             const py::object& dtype) {
            return start(
                g,
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  const ElementSpan in = p.elements(input, Access::read, "igather's input", type);
                  return std::pair(in, p.optional_elements(output, Access::write,
                                                           "igather's output", type, in.dtype));
                },
                [&](auto spans) {
                  return transport_of(g).igather(spans.first, spans.second, rank_of(root, "root"));
                });
          },
          py::arg("input"), py::arg("output"), py::arg("root"), no_dtype,
          "gather, returning a Request.")
      .def(
          "iscatter",
          [](const PyGroup& g, const py::object& input, const py::object& output, long long root,
             const py::object& dtype) {
            return start(
                g,
                [&](PendingCall& p) {
                  const auto type = dtype_named(dtype);
                  const ElementSpan out =
                      p.elements(output, Access::write, "iscatter's output", type);
                  return std::pair(
                      p.optional_elements(input, Access::read, "iscatter's input", type, out.dtype),
                      out);
                },
                [&](auto spans) {
                  return transport_of(g).iscatter(spans.first, spans.second, rank_of(root, "root"));
                });
          },
          py::arg("input"), py::arg("output"), py::arg("root"), no_dtype,
          "scatter, returning a Request.")
      .def(
          "iall_gather_v",
          [](const PyGroup& g, const py::object& input, const py::object& output,
             const std::vector<py::ssize_t>& counts, const py::object& dtype) {
            struct Spans {
              ElementSpan in, out;
              std::span<const std::size_t> counts;
            };
            return start(
                g,
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
          [](const PyGroup& g, const py::object& input, const std::vector<py::ssize_t>& send_counts,
             const py::object& output, const std::vector<py::ssize_t>& recv_counts,
             const py::object& dtype) {
            struct Spans {
              ElementSpan in;
              std::span<const std::size_t> sends;
              ElementSpan out;
              std::span<const std::size_t> receives;
            };
            return start(
                g,
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
          [](const PyGroup& g) {
            return start(
                g, [](PendingCall&) { return 0; }, [&](int) { return transport_of(g).ibarrier(); });
          },
          "barrier, returning a Request.");
}

void define_point_to_point(py::class_<PyGroup>& group) {
  group
      .def(
          "send",
          [](const PyGroup& g, const py::object& data, long long to, long long tag) {
            PendingCall held(g);
            const auto bytes = held.hold(data, Access::read, "send's data").readable();
            released([&] { transport_of(g).send_bytes(rank_of(to, "rank"), tag_of(tag), bytes); });
          },
          py::arg("data"), py::arg("to"), py::arg("tag") = 0,
          "Sends the bytes of `data` to rank `to`; returns once they are on their way (not "
          "waiting for the receive).")
      .def(
          "recv",
          [](const PyGroup& g, const py::object& into, long long source, long long tag) {
            PendingCall held(g);
            const auto bytes = held.hold(into, Access::write, "recv's buffer").writable();
            return released([&] {
              return transport_of(g).recv_bytes_into(rank_of(source, "rank"), tag_of(tag), bytes);
            });
          },
          py::arg("into"), py::arg("source"), py::arg("tag") = 0,
          "Receives the next message of `tag` from `source` into `into`; returns its length. "
          "A longer message is an InvalidArgumentError.")
      .def(
          "recv_bytes",
          [](const PyGroup& g, long long source, long long tag) {
            const std::vector<std::byte> message = released(
                [&] { return transport_of(g).recv_bytes(rank_of(source, "rank"), tag_of(tag)); });
            return py::bytes(reinterpret_cast<const char*>(message.data()), message.size());
          },
          py::arg("source"), py::arg("tag") = 0,
          "Receives the next message of `tag` from `source`, of any length, as bytes.")
      .def(
          "isend",
          [](const PyGroup& g, const py::object& data, long long to, long long tag) {
            return start(
                g,
                [&](PendingCall& p) {
                  return p.hold(data, Access::read, "isend's data").readable();
                },
                [&](std::span<const std::byte> bytes) {
                  return transport_of(g).isend(rank_of(to, "rank"), tag_of(tag), bytes);
                });
          },
          py::arg("data"), py::arg("to"), py::arg("tag") = 0, "send, returning a Request.")
      .def(
          "irecv",
          [](const PyGroup& g, const py::object& into, long long source, long long tag) {
            return start(
                g,
                [&](PendingCall& p) {
                  return p.hold(into, Access::write, "irecv's buffer").writable();
                },
                [&](std::span<std::byte> bytes) {
                  return transport_of(g).irecv(rank_of(source, "rank"), tag_of(tag), bytes);
                });
          },
          py::arg("into"), py::arg("source"), py::arg("tag") = 0,
          "recv, returning a Request whose wait() gives the message's length.");
}

}  // namespace
}  // namespace rlx::python
