// A rank's shared-memory segment: the memory that ranks on one host exchange
// data through (issue 19's same-host path).
//
// Each rank creates its own segment, a file in /dev/shm named from the job
// token, a per-job instance, the rank and the creating process (`name_for`),
// so two jobs on one host never meet and no other user's process can open it
// (mode 0600, O_EXCL). Its pages are reserved when it is created
// (fallocate), so a full or too small /dev/shm is a clear error at setup,
// never a SIGBUS mid-collective. Peers on the host open it by name once the
// creator has marked it ready; once every peer has mapped it, the names are
// unlinked, so nothing is left in /dev/shm whatever happens to the job later
// (a crash, SIGKILL). Before then, what a start killed part way leaves is
// removed by whoever learns of it first: the surviving ranks of the group,
// the launcher (`remove_job_segments`), or the next start of rlx on the host,
// which removes every segment whose creating process is gone
// (`remove_orphaned_segments`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "rlx/transport/errors.h"
#include "rlx/transport/socket_io.h"

namespace rlx::shm {

// Where segments live; tests may point elsewhere.
inline constexpr const char* kDefaultDirectory = "/dev/shm";

// The process that creates a segment, as the segment's name records it.
struct SegmentOwner {
  std::uint64_t pid_namespace = 0;  // the inode of /proc/self/ns/pid; 0: unknown
  std::int32_t pid = 0;
  static SegmentOwner self();
};

class SharedSegment {
 public:
  // "rlx-<16 hex digits of HMAC(token, "shm")>-<instance, 16 hex>-<rank>-
  // <owner's pid namespace>-<owner's pid>": the token never appears, and the
  // prefix is the same for every rank of the job. `instance` is a number the
  // job's ranks agree on at set-up, so two jobs started with the same token
  // (a misuse, but a possible one) still never open each other's segments.
  static std::string name_for(std::string_view job_token, std::uint64_t instance, int rank,
                              const SegmentOwner& owner);
  static std::string job_prefix(std::string_view job_token);
  // Removes `name` from `directory` whoever created it (ENOENT is no error):
  // once every rank mapped a segment, or when set-up failed.
  static void remove(const std::string& directory, const std::string& name);

  // Creates, sizes (reserving every page) and maps `name` in `directory` with
  // `bytes` usable bytes, then marks it ready. Throws CollectiveError:
  // resource_exhausted when the directory lacks the space (naming it and the
  // sizes), invalid_argument when the name exists (another job's leftovers).
  static SharedSegment create(const std::string& directory, const std::string& name,
                              std::size_t bytes, const ErrorSite& site);
  // Opens and maps a peer's segment, waiting until `deadline` for its creator
  // to make it ready, unless `stop()` says the job failed meanwhile. Throws
  // CollectiveError: timeout (naming the segment), protocol_violation when
  // its header or size is not what rlx wrote.
  static SharedSegment open(
      const std::string& directory, const std::string& name, std::size_t bytes, Deadline deadline,
      const ErrorSite& site, const std::function<bool()>& stop = [] { return false; });

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

// Removes every segment of this user in `directory` whose creating process
// (recorded in its name) no longer runs, in this process's pid namespace;
// returns how many. Every start of the same-host path and of rlxrun runs it,
// so a rank killed during set-up, with no survivor or launcher to clean up
// after it, leaves nothing past the next start.
int remove_orphaned_segments(const std::string& directory);

}  // namespace rlx::shm
