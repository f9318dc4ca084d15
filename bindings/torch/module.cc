// The Python module rlx_torch: importing it registers the "rlx" backend of
// torch.distributed, so dist.init_process_group("rlx") and
// dist.new_group(backend="rlx") make rlx groups.
#include <atomic>
#include <chrono>

#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/utils/pybind.h>

#include "bindings/torch/process_group.h"
#include "bindings/torch/torch_environment.h"
#include "rlx/init.h"
#include "rlx/join.h"
#include "rlx/transport/launch_env.h"

namespace py = pybind11;

namespace rlx::torch_backend {
namespace {

// torch's store, as join() asks for one. Keys live under the PrefixStore
// torch gives each group, so groups never read each other's.
KeyValueStore through(const c10::intrusive_ptr<c10d::Store>& store) {
  return {
      .set =
          [store](const std::string& key, const std::string& value) {
            store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
          },
      .get =
          [store](const std::string& key) {
            const std::vector<uint8_t> value = store->get(key);
            return std::string(value.begin(), value.end());
          },
  };
}

// True for the first world-sized group of a process that rlxrun started:
// that one joins through rlxrun's rendezvous (rlx::init), so rlxrun sees its
// ranks start and RLX_BACKEND chooses the transport. Every rank asks for its
// groups in one order, so every rank agrees on which group that is.
bool joins_rlxruns_world(int rank, int size) {
  static std::atomic<bool> joined{false};
  const auto env = launch_env::from_process_environment();
  const bool rlxruns = env.group_source == launch_env::GroupSource::rlx &&
                       !env.coordinator.empty() && env.rank == rank && env.world_size == size;
  return rlxruns && !joined.exchange(true);
}

// torch's timeout= when the program chose one; torch's default (30 minutes,
// "given that THD did not have timeouts") keeps RLX_TIMEOUT_S's, so a frozen
// peer is named within rlx's 5 minutes unless the program asks to wait longer.
std::chrono::milliseconds deadline_for(std::chrono::duration<float> timeout) {
  const auto asked = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
  return asked == kProcessGroupDefaultTimeout ? std::chrono::milliseconds(0) : asked;
}

// The host of the TCPStore under torch's PrefixStores, which every rank
// reaches; empty for other stores (a file, a hash).
std::string store_host(c10::intrusive_ptr<c10d::Store> store) {
  while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store.get()))
    store = prefixed->getUnderlyingStore();
  auto* tcp = dynamic_cast<c10d::TCPStore*>(store.get());
  return tcp ? tcp->getHost() : std::string();
}

// torch.distributed's creator: (store, rank, size, timeout), as
// Backend.register_backend calls it for the world and for each new_group.
c10::intrusive_ptr<ProcessGroupRlx> create(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                           int size, std::chrono::duration<float> timeout) {
  if (auto world = take_discovered_world(rank, size))
    return c10::make_intrusive<ProcessGroupRlx>(std::move(*world));
  if (joins_rlxruns_world(rank, size)) return c10::make_intrusive<ProcessGroupRlx>(init());
  return c10::make_intrusive<ProcessGroupRlx>(
      join(rank, size, through(store),
           {.backend = "any", .timeout = deadline_for(timeout), .reach_from = store_host(store)}));
}

}  // namespace
}  // namespace rlx::torch_backend

PYBIND11_MODULE(_backend, m) {
  using rlx::torch_backend::ProcessGroupRlx;
  m.doc() =
      "torch.distributed's \"rlx\" backend: import rlx_torch, then "
      "dist.init_process_group(\"rlx\")";
  // torch's ProcessGroup and Store types first: ours derives from the one,
  // takes the other.
  py::module_ distributed = py::module_::import("torch.distributed");
  py::class_<ProcessGroupRlx, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupRlx>>(
      m, "ProcessGroupRlx")
      .def_property_readonly("transport", &ProcessGroupRlx::transport,
                             "rlx's transport under the group: tcp, verbs, ...");
  m.def("create_process_group", &rlx::torch_backend::create, py::arg("store"), py::arg("rank"),
        py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Joins an rlx group through torch's store (what init_process_group calls).");
  m.def("torch_environment", &rlx::torch_backend::torch_environment,
        py::call_guard<py::gil_scoped_release>(),
        "Joins rlx's group of the job and returns torch's env:// variables for this rank.");
  m.def("wait_for_every_group", &rlx::torch_backend::wait_for_every_group,
        py::call_guard<py::gil_scoped_release>(),
        "Waits until every group's calls and their Futures' completions have run (at exit).");
  py::object backend = distributed.attr("Backend");
  if (!py::hasattr(backend, "RLX"))
    backend.attr("register_backend")("rlx", m.attr("create_process_group"));
}
