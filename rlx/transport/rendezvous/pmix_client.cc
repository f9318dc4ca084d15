#include "rlx/transport/rendezvous/pmix_client.h"

#include <mutex>
#include <stdexcept>

#include <pmix.h>

#include "rlx/transport/errors.h"

namespace rlx::pmix {
namespace {

ErrorSite site(int rank, int size, std::string operation) {
  return {.rank = rank, .world_size = size, .operation = std::move(operation)};
}

std::string describe(pmix_status_t status) { return PMIx_Error_string(status); }

// One pmix_info_t array, freed on scope exit.
class Infos {
 public:
  explicit Infos(std::size_t n) : n_(n) { PMIX_INFO_CREATE(infos_, n_); }
  ~Infos() { PMIX_INFO_FREE(infos_, n_); }
  Infos(const Infos&) = delete;
  Infos& operator=(const Infos&) = delete;
  pmix_info_t* data() { return infos_; }
  std::size_t size() const { return n_; }

 private:
  pmix_info_t* infos_ = nullptr;
  std::size_t n_;
};

class PmixClient final : public Client {
 public:
  PmixClient() {
    const pmix_status_t status = PMIx_Init(&self_, nullptr, 0);
    if (status != PMIX_SUCCESS) {
      throw CollectiveError(ErrorKind::backend_unavailable, site(-1, -1, "join the PMIx job"),
                            "PMIx_Init failed: " + describe(status),
                            "was this process started by a PMIx launcher (srun --mpi=pmix, "
                            "mpirun)? Its PMIX_* variables name a server that does not answer");
    }
    membership_.rank = static_cast<int>(self_.rank);
    membership_.size = static_cast<int>(job_number(PMIX_JOB_SIZE, true));
    membership_.local_rank = static_cast<int>(job_number(PMIX_LOCAL_RANK, false));
    membership_.local_size = static_cast<int>(job_number(PMIX_LOCAL_SIZE, true));
  }
  ~PmixClient() override { PMIx_Finalize(nullptr, 0); }

  Membership membership() const override { return membership_; }

  std::string host_of(int rank) override {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, self_.nspace, static_cast<pmix_rank_t>(rank));
    pmix_value_t* value = nullptr;
    const pmix_status_t status = PMIx_Get(&proc, PMIX_HOSTNAME, nullptr, 0, &value);
    std::string host;
    if (status == PMIX_SUCCESS && value != nullptr && value->type == PMIX_STRING) {
      host = value->data.string;
    }
    if (value != nullptr) PMIX_VALUE_RELEASE(value);
    return host;
  }

  std::vector<std::string> all_gather(std::string_view key, const std::string& mine,
                                      std::chrono::milliseconds timeout) override {
    const std::string name(key);
    put(name, mine);
    fence(timeout);
    std::vector<std::string> all(static_cast<std::size_t>(membership_.size));
    for (int r = 0; r < membership_.size; ++r) all[static_cast<std::size_t>(r)] = get(name, r);
    return all;
  }

 private:
  // A job-level number (wildcard rank) or one of this process (`of_job` false).
  std::uint64_t job_number(const char* key, bool of_job) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, self_.nspace, of_job ? PMIX_RANK_WILDCARD : self_.rank);
    pmix_value_t* value = nullptr;
    const pmix_status_t status = PMIx_Get(&proc, key, nullptr, 0, &value);
    if (status != PMIX_SUCCESS || value == nullptr) {
      throw CollectiveError(
          ErrorKind::backend_unavailable,
          site(static_cast<int>(self_.rank), -1, "join the PMIx job"),
          std::string("the PMIx server did not give ") + key + ": " + describe(status));
    }
    std::uint64_t number = 0;
    switch (value->type) {
      case PMIX_UINT32:
        number = value->data.uint32;
        break;
      case PMIX_UINT16:
        number = value->data.uint16;
        break;
      case PMIX_UINT64:
        number = value->data.uint64;
        break;
      case PMIX_INT:
        number = static_cast<std::uint64_t>(value->data.integer);
        break;
      default:
        number = 0;
    }
    PMIX_VALUE_RELEASE(value);
    return number;
  }

  void put(const std::string& key, const std::string& text) {
    pmix_value_t value;
    PMIX_VALUE_CONSTRUCT(&value);
    value.type = PMIX_STRING;
    value.data.string = const_cast<char*>(text.c_str());  // PMIx_Put copies it
    pmix_status_t status = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    if (status == PMIX_SUCCESS) status = PMIx_Commit();
    if (status != PMIX_SUCCESS) {
      throw CollectiveError(ErrorKind::backend_unavailable, site_of("publish endpoint"),
                            "PMIx_Put/PMIx_Commit failed: " + describe(status));
    }
  }

  void fence(std::chrono::milliseconds timeout) {
    pmix_proc_t everyone;
    PMIX_LOAD_PROCID(&everyone, self_.nspace, PMIX_RANK_WILDCARD);
    Infos infos(2);
    bool collect = true;
    int seconds = static_cast<int>((timeout.count() + 999) / 1000);
    PMIX_INFO_LOAD(&infos.data()[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&infos.data()[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
    const pmix_status_t status = PMIx_Fence(&everyone, 1, infos.data(), infos.size());
    if (status != PMIX_SUCCESS) {
      const bool late = status == PMIX_ERR_TIMEOUT;
      throw CollectiveError(late ? ErrorKind::timeout : ErrorKind::peer_lost,
                            site_of("exchange endpoints"), "PMIx_Fence failed: " + describe(status),
                            late ? "every rank must reach rlx::init within RLX_CONNECT_TIMEOUT_S"
                                 : "a rank of the job may have exited; its own output says why");
    }
  }

  std::string get(const std::string& key, int rank) {
    pmix_proc_t proc;
    PMIX_LOAD_PROCID(&proc, self_.nspace, static_cast<pmix_rank_t>(rank));
    pmix_value_t* value = nullptr;
    const pmix_status_t status = PMIx_Get(&proc, key.c_str(), nullptr, 0, &value);
    if (status != PMIX_SUCCESS || value == nullptr || value->type != PMIX_STRING) {
      if (value != nullptr) PMIX_VALUE_RELEASE(value);
      throw CollectiveError(
          ErrorKind::protocol_violation, site_of("exchange endpoints"),
          "rank " + std::to_string(rank) + " published no " + key + ": " + describe(status));
    }
    std::string text = value->data.string;
    PMIX_VALUE_RELEASE(value);
    return text;
  }

  ErrorSite site_of(std::string operation) const {
    return site(membership_.rank, membership_.size, std::move(operation));
  }

  pmix_proc_t self_{};
  Membership membership_;
};

}  // namespace

bool is_built() { return true; }

std::shared_ptr<Client> Client::connect() { return std::make_shared<PmixClient>(); }

}  // namespace rlx::pmix
