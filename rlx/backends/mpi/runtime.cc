#include "rlx/backends/mpi/runtime.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "rlx/collectives/reduce.h"

namespace rlx::mpi {
namespace {

constexpr std::size_t kOps = 4;  // sum, prod, min, max

struct Runtime {
  std::mutex mutex;
  bool hooked = false;
  std::vector<Releasable*> live;
  std::array<MPI_Op, kOps> f16_ops{};
  std::array<MPI_Op, kOps> bf16_ops{};
  std::array<MPI_Op, kOps> u8_ops{};
};

// Never destroyed: transports may unregister from static destructors that run
// after every other static is gone.
Runtime& runtime() {
  static Runtime* instance = new Runtime;
  return *instance;
}

// inout[i] = in[i] op inout[i] with rlx's kernel; the ops are commutative.
template <Dtype kDtype, ReduceOp kOp>
void kernel_combine(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto count = static_cast<std::size_t>(*len);
  reduce_into(ElementSpan{inout, count, kDtype}, ConstElementSpan{in, count, kDtype}, kOp);
}

template <Dtype kDtype>
std::array<MPI_Op, kOps> create_kernel_ops() {
  constexpr std::array<MPI_User_function*, kOps> functions = {
      kernel_combine<kDtype, ReduceOp::sum>, kernel_combine<kDtype, ReduceOp::prod>,
      kernel_combine<kDtype, ReduceOp::min>, kernel_combine<kDtype, ReduceOp::max>};
  std::array<MPI_Op, kOps> ops{};
  for (std::size_t i = 0; i < kOps; ++i) {
    const int code = MPI_Op_create(functions[i], /*commute=*/1, &ops[i]);
    if (code != MPI_SUCCESS) throw mpi_error(code, {.operation = "init mpi"}, "MPI_Op_create");
  }
  return ops;
}

void free_kernel_ops(Runtime& r) {
  for (auto* ops : {&r.f16_ops, &r.bf16_ops, &r.u8_ops}) {
    for (MPI_Op& op : *ops) {
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
    }
  }
}

// Runs first inside MPI_Finalize (whoever calls it): releases what is alive.
int on_finalize(MPI_Comm, int, void*, void*) {
  Runtime& r = runtime();
  std::vector<Releasable*> taken;
  {
    std::lock_guard lock(r.mutex);
    taken.swap(r.live);
  }
  for (Releasable* live : taken) live->release_for_finalize();
  free_kernel_ops(r);
  return MPI_SUCCESS;
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void install_hooks(Runtime& r, const ErrorSite& where) {
  int keyval = MPI_KEYVAL_INVALID;
  int code = MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_finalize, &keyval, nullptr);
  if (code == MPI_SUCCESS) code = MPI_Comm_set_attr(MPI_COMM_SELF, keyval, nullptr);
  if (code != MPI_SUCCESS) throw mpi_error(code, where, "installing the MPI_Finalize hook");
  r.f16_ops = create_kernel_ops<Dtype::f16>();
  r.bf16_ops = create_kernel_ops<Dtype::bf16>();
  r.u8_ops = create_kernel_ops<Dtype::u8>();
  r.hooked = true;
}

std::string thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
  }
  return "thread level " + std::to_string(level);
}

// Starts MPI for rlx; returns the thread level it provides.
int start_mpi(const ErrorSite& where) {
  int provided = MPI_THREAD_SINGLE;
  const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (code != MPI_SUCCESS) throw mpi_error(code, where, "MPI_Init_thread");
  std::atexit(finalize_at_exit);
  if (provided < MPI_THREAD_MULTIPLE) {
    throw CollectiveError(ErrorKind::backend_unavailable, where,
                          "this Open MPI provides only " + thread_level_name(provided) +
                              ", and rlx needs MPI_THREAD_MULTIPLE",
                          "use an Open MPI built with thread support (ompi_info | grep Thread)");
  }
  return provided;
}

void check_programs_level(const ErrorSite& where) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided >= MPI_THREAD_MULTIPLE) return;
  throw CollectiveError(ErrorKind::backend_unavailable, where,
                        "the program initialised MPI with " + thread_level_name(provided) +
                            ", and rlx needs MPI_THREAD_MULTIPLE (collectives may run on a "
                            "worker thread while another thread sends)",
                        "initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...), or "
                        "let rlx::init start MPI");
}

}  // namespace

void ensure_started(const ErrorSite& where) {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    throw CollectiveError(ErrorKind::backend_unavailable, where, "MPI has already been finalised",
                          "create rlx's group before MPI_Finalize");
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    check_programs_level(where);
  } else {
    start_mpi(where);
  }
  if (!r.hooked) install_hooks(r, where);
}

void register_live(Releasable* live) {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  r.live.push_back(live);
}

bool unregister(Releasable* live) {
  Runtime& r = runtime();
  std::lock_guard lock(r.mutex);
  const auto it = std::find(r.live.begin(), r.live.end(), live);
  if (it == r.live.end()) return false;
  r.live.erase(it);
  return true;
}

MPI_Op kernel_op(Dtype dtype, ReduceOp op) {
  const Runtime& r = runtime();
  const auto& ops = dtype == Dtype::bf16 ? r.bf16_ops : dtype == Dtype::u8 ? r.u8_ops : r.f16_ops;
  return ops[static_cast<std::size_t>(op)];
}

CollectiveError mpi_error(int code, ErrorSite site, std::string_view call) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  int error_class = MPI_ERR_OTHER;
  MPI_Error_class(code, &error_class);
  ErrorKind kind = ErrorKind::peer_lost;  // what an MPI failure at run time usually is
  switch (error_class) {
    case MPI_ERR_NO_MEM:
      kind = ErrorKind::resource_exhausted;
      break;
    case MPI_ERR_TRUNCATE:
      kind = ErrorKind::mismatch;
      break;
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_OP:
    case MPI_ERR_ARG:
      kind = ErrorKind::invalid_argument;
      break;
    default:
      break;
  }
  return CollectiveError(kind, std::move(site),
                         std::string(call) + " failed: " + std::string(text, length) +
                             " (MPI error " + std::to_string(code) + ")");
}

}  // namespace rlx::mpi
