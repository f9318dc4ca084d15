// A rank's shared-memory segment: the memory that ranks on one host exchange
// data through (issue 19's same-host path).
//
// Each rank creates its own segment, a file in /dev/shm named from the job
// token, a per-job instance and the rank (`name_for`), so two jobs on one
// host never meet and no
// other user's process can open it (mode 0600, O_EXCL). Its pages are
// reserved when it is created (fallocate), so a full or too small /dev/shm is
// a clear error at setup, never a SIGBUS mid-collective. Peers on the host
// open it by name once the creator has marked it ready; once every peer has
// mapped it, the creator unlinks the name, so nothing is left in /dev/shm
// whatever happens to the job later (a crash, SIGKILL). Before then, the
// launcher removes what a failed start left behind (`remove_job_segments`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "transport/errors.h"
#include "transport/socket_io.h"

namespace rlx::shm {

// Where segments live; tests may point elsewhere.
inline constexpr const char* kDefaultDirectory = "/dev/shm";

class SharedSegment {
 public:
  // "rlx-<16 hex digits of HMAC(token, "shm")>-<instance, 16 hex>-<rank>":
  // the token never appears, and the prefix is the same for every rank of the
  // job. `instance` is a number the job's ranks agree on at set-up, so two
  // jobs started with the same token (a misuse, but a possible one) still
  // never open each other's segments.
  static std::string name_for(std::string_view job_token, std::uint64_t instance, int rank);
  static std::string job_prefix(std::string_view job_token);

  // Creates, sizes (reserving every page) and maps `name` in `directory` with
  // `bytes` usable bytes, then marks it ready. Throws CollectiveError:
  // resource_exhausted when the directory lacks the space (naming it and the
  // sizes), invalid_argument when the name exists (another job's leftovers).
  static SharedSegment create(const std::string& directory, const std::string& name,
                              std::size_t bytes, const ErrorSite& site);
  // Opens and maps a peer's segment, waiting until `deadline` for its creator
  // to make it ready. Throws CollectiveError: timeout (naming the segment),
  // protocol_violation when its header or size is not what rlx wrote.
  static SharedSegment open(const std::string& directory, const std::string& name,
                            std::size_t bytes, Deadline deadline, const ErrorSite& site);

  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&& other) noexcept;
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  ~SharedSegment();

  // Removes the name; the mapping (and every peer's) stays valid.
  void unlink();

  // The usable bytes, after the segment's own header; 64-byte aligned.
  std::byte* data() const { return base_ + kHeaderBytes; }
  std::size_t size() const { return bytes_; }
  const std::string& path() const { return path_; }

  static constexpr std::size_t kHeaderBytes = 64;

 private:
  SharedSegment(std::string path, std::byte* base, std::size_t bytes, bool owner)
      : path_(std::move(path)), base_(base), bytes_(bytes), owner_(owner) {}
  void release() noexcept;

  std::string path_;
  std::byte* base_ = nullptr;
  std::size_t bytes_ = 0;
  bool owner_ = false;  // unlinks the name when destroyed, if still there
};

// Removes every segment of the job whose token is `job_token` from
// `directory`; returns how many. What rlxrun runs when a job ends, so a start
// that failed before the ranks unlinked their names leaves nothing behind.
int remove_job_segments(const std::string& directory, std::string_view job_token);

}  // namespace rlx::shm
