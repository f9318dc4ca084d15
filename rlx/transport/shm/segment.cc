#include "rlx/transport/shm/segment.h"

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "rlx/transport/auth.h"

namespace rlx::shm {
namespace {

constexpr std::uint64_t kSegmentMagic = 0x4d48535f584c52;  // "RLX_SHM"

// The first kHeaderBytes of every segment. `ready` is written last, with
// release order, once the creator has sized and reserved the whole file.
struct Header {
  std::uint64_t magic;
  std::uint64_t bytes;
  std::atomic<std::uint32_t> ready;
};
static_assert(sizeof(Header) <= SharedSegment::kHeaderBytes);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

std::string path_of(const std::string& directory, const std::string& name) {
  return directory + "/" + name;
}

std::string free_space_of(const std::string& directory) {
  struct statvfs fs {};
  if (::statvfs(directory.c_str(), &fs) != 0) return "unknown";
  return format_bytes(static_cast<std::size_t>(fs.f_bavail) * fs.f_frsize);
}

// Populated: every page is in this process's page tables before the first
// collective, so no call takes a page fault.
std::byte* map(int fd, std::size_t total) {
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  return base == MAP_FAILED ? nullptr : static_cast<std::byte*>(base);
}

[[noreturn]] void fail_errno(ErrorKind kind, const ErrorSite& site, const std::string& what,
                             int error, std::string hint = {}) {
  throw CollectiveError(kind, site, what + ": " + std::strerror(error), std::move(hint));
}

// The name holds this process's pid and a number fresh for this start of
// the job: no earlier job of rlx made it.
[[noreturn]] void fail_existing(const std::string& path, const ErrorSite& site) {
  struct stat st {};
  const std::string owner = ::lstat(path.c_str(), &st) == 0
                                ? " (owned by uid " + std::to_string(st.st_uid) + ")"
                                : std::string();
  throw CollectiveError(ErrorKind::invalid_argument, site,
                        "cannot create shared memory " + path + ": the name exists already" +
                            owner + ", and no rlx job made it (the name is new for this start)",
                        "something else creates files named rlx-* in /dev/shm; remove it");
}

}  // namespace

std::string SharedSegment::job_prefix(std::string_view job_token) {
  static constexpr std::string_view kPurpose = "rlx shared memory";
  const std::span<const std::byte> parts[] = {std::as_bytes(std::span(kPurpose))};
  const auth::Mac mac = auth::mac(job_token, parts);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string prefix = "rlx-";
  for (std::size_t i = 0; i < 8; ++i) {
    const auto byte = static_cast<unsigned>(mac[i]);
    prefix += kHex[byte >> 4];
    prefix += kHex[byte & 15];
  }
  return prefix + "-";
}

SegmentOwner SegmentOwner::self() {
  struct stat ns {};
  const std::uint64_t pid_namespace =
      ::stat("/proc/self/ns/pid", &ns) == 0 ? static_cast<std::uint64_t>(ns.st_ino) : 0;
  return {pid_namespace, static_cast<std::int32_t>(::getpid())};
}

std::string SharedSegment::name_for(std::string_view job_token, std::uint64_t instance, int rank,
                                    const SegmentOwner& owner) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(instance));
  return job_prefix(job_token) + hex + "-" + std::to_string(rank) + "-" +
         std::to_string(owner.pid_namespace) + "-" + std::to_string(owner.pid);
}

void SharedSegment::remove(const std::string& directory, const std::string& name) {
  ::unlink(path_of(directory, name).c_str());
}

SharedSegment SharedSegment::create(const std::string& directory, const std::string& name,
                                    std::size_t bytes, const ErrorSite& site) {
  const std::string path = path_of(directory, name);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    const int error = errno;
    if (error == EEXIST) fail_existing(path, site);
    if (is_out_of_descriptors(error)) {
      throw out_of_descriptors(site, "cannot create shared memory " + path, error);
    }
    fail_errno(ErrorKind::resource_exhausted, site, "cannot create shared memory " + path, error,
               "can this user write to " + directory + "?");
  }
  const std::size_t total = kHeaderBytes + bytes;
  // Reserve every page now: a sparse file in a full tmpfs fails at the first
  // touch with SIGBUS, in the middle of a collective.
  const int reserved = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
  if (reserved != 0) {
    ::close(fd);
    ::unlink(path.c_str());
    fail_errno(ErrorKind::resource_exhausted, site,
               "cannot reserve " + format_bytes(total) + " of shared memory in " + directory +
                   " (" + free_space_of(directory) + " free)",
               reserved, "give " + directory + " more room, or set RLX_SHM=0 to use TCP");
  }
  std::byte* base = map(fd, total);
  const int map_error = errno;
  ::close(fd);
  if (base == nullptr) {
    ::unlink(path.c_str());
    fail_errno(ErrorKind::resource_exhausted, site, "cannot map " + path, map_error);
  }
  auto* header = new (base) Header{kSegmentMagic, bytes, {0}};
  header->ready.store(1, std::memory_order_release);
  return SharedSegment(path, base, bytes, true);
}

namespace {

// The segment at `fd` once its creator made it ready: mapped, or nullptr
// while it is not ready yet. Throws when it is ready but not what rlx expects.
std::byte* map_when_ready(int fd, const std::string& path, std::size_t bytes,
                          const ErrorSite& site) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < SharedSegment::kHeaderBytes) {
    return nullptr;
  }
  // Only a segment this user made for its own eyes: the name comes from the
  // job token, but a planted file must not be trusted either.
  if (st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    throw CollectiveError(ErrorKind::protocol_violation, site,
                          path + " is not a private segment of this user",
                          "remove it; rlx creates its segments with mode 0600");
  }
  const auto total = static_cast<std::size_t>(st.st_size);
  std::byte* base = map(fd, total);
  if (base == nullptr) return nullptr;
  const auto* header = reinterpret_cast<const Header*>(base);
  if (header->ready.load(std::memory_order_acquire) != 1) {
    ::munmap(base, total);
    return nullptr;
  }
  if (header->magic != kSegmentMagic || header->bytes != bytes ||
      total != SharedSegment::kHeaderBytes + bytes) {
    ::munmap(base, total);
    throw CollectiveError(
        ErrorKind::protocol_violation, site,
        path + " is not a segment of " + format_bytes(bytes) + " written by this rlx build",
        "run the same rlx build on every rank");
  }
  return base;
}

}  // namespace

SharedSegment SharedSegment::open(const std::string& directory, const std::string& name,
                                  std::size_t bytes, Deadline deadline, const ErrorSite& site,
                                  const std::function<bool()>& stop) {
  const std::string path = path_of(directory, name);
  constexpr auto kLongestPause = std::chrono::microseconds(5000);
  for (auto pause = std::chrono::microseconds(50);; pause = std::min(pause * 2, kLongestPause)) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) {
      std::byte* base = nullptr;
      try {
        base = map_when_ready(fd, path, bytes, site);
      } catch (...) {
        ::close(fd);
        throw;
      }
      ::close(fd);
      if (base != nullptr) return SharedSegment(path, base, bytes, false);
    } else if (is_out_of_descriptors(errno)) {
      throw out_of_descriptors(site, "cannot open shared memory " + path, errno);
    } else if (errno != ENOENT) {
      fail_errno(ErrorKind::protocol_violation, site, "cannot open shared memory " + path, errno);
    }
    if (Clock::now() >= deadline || stop()) {
      throw CollectiveError(ErrorKind::timeout, site,
                            "shared memory " + path + " was not ready in time",
                            "did the rank that creates it start, and does it share this host?");
    }
    std::this_thread::sleep_for(pause);
  }
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : path_(std::move(other.path_)),
      base_(std::exchange(other.base_, nullptr)),
      bytes_(other.bytes_),
      owner_(std::exchange(other.owner_, false)) {}

SharedSegment& SharedSegment::operator=(SharedSegment&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = other.bytes_;
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

SharedSegment::~SharedSegment() { release(); }

void SharedSegment::unlink() {
  if (owner_) ::unlink(path_.c_str());
  owner_ = false;
}

void SharedSegment::release() noexcept {
  unlink();
  if (base_ != nullptr) ::munmap(base_, kHeaderBytes + bytes_);
  base_ = nullptr;
}

namespace {

// The creator a segment's name records ("...-<pid namespace>-<pid>"), if
// the name has that form.
std::optional<SegmentOwner> owner_in_name(std::string_view name) {
  const auto parse = [](std::string_view text, auto& value) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    return ec == std::errc() && end == text.data() + text.size();
  };
  const auto last = name.rfind('-');
  if (last == std::string_view::npos || last == 0) return std::nullopt;
  const auto before = name.rfind('-', last - 1);
  if (before == std::string_view::npos) return std::nullopt;
  SegmentOwner owner;
  if (!parse(name.substr(before + 1, last - before - 1), owner.pid_namespace) ||
      !parse(name.substr(last + 1), owner.pid) || owner.pid <= 0) {
    return std::nullopt;
  }
  return owner;
}

// False only when `pid` (in this pid namespace) surely runs no more: no such
// process, or a zombie nobody has reaped yet.
bool may_run(std::int32_t pid) {
  if (::kill(pid, 0) != 0) return errno != ESRCH;
  std::FILE* stat = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (stat == nullptr) return true;
  char line[512] = {};
  const bool read = std::fgets(line, sizeof line, stat) != nullptr;
  std::fclose(stat);
  const char* state = read ? std::strrchr(line, ')') : nullptr;  // the name may hold spaces
  return state == nullptr || std::strncmp(state, ") Z", 3) != 0;
}

}  // namespace

int remove_orphaned_segments(const std::string& directory) {
  const SegmentOwner self = SegmentOwner::self();
  if (self.pid_namespace == 0) return 0;  // pids that cannot be placed prove nothing
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (!name.starts_with("rlx-")) continue;
    const auto owner = owner_in_name(name);
    if (!owner || owner->pid_namespace != self.pid_namespace || may_run(owner->pid)) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
      continue;
    }
    if (::unlinkat(::dirfd(dir), entry->d_name, 0) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

int remove_job_segments(const std::string& directory, std::string_view job_token) {
  const std::string prefix = SharedSegment::job_prefix(job_token);
  DIR* dir = ::opendir(directory.c_str());
  if (dir == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name.starts_with(prefix) && ::unlinkat(::dirfd(dir), entry->d_name, 0) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace rlx::shm
