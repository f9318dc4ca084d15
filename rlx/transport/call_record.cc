#include "rlx/transport/call_record.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rlx/transport/errors.h"
#include "rlx/transport/launch_env.h"
#include "rlx/transport/log.h"
#include "rlx/transport/transport.h"

namespace rlx {
namespace {

constexpr std::size_t kKeptFailures = 16;
constexpr std::size_t kKeptGroups = 1024;
// Threads beyond this many at once go unrecorded (a ring is kept per thread).
constexpr std::size_t kMaxRings = 256;
// How often the service thread moves the record's clock on, and visits the
// rings for the trace while calls come fast (a quarter of a ring since the
// last visit).
constexpr int kTickMs = 10;
constexpr int kBusyTickMs = 1;

}  // namespace

// failed is the bits of running and done: marking a running entry failed is one OR.
enum class CallRecord::State : std::uint8_t { running = 1, done = 2, failed = 3, posted = 4 };

namespace {

using State = CallRecord::State;

std::string_view name_of(State state) {
  switch (state) {
    case State::running:
      return "running";
    case State::done:
      return "done";
    case State::failed:
      return "failed";
    case State::posted:
      return "posted";
  }
  return "unknown";
}

// The names of the algorithms and paths calls took, each a small number
// (a record entry has room for 9 and 6 bits), found by the name's address:
// lock-free for names seen before.
template <std::uint16_t kMaxIds>
class NameIds {
 public:
  // 0 when the table is full.
  std::uint16_t id_of(std::string_view name) {
    const auto key = reinterpret_cast<std::uintptr_t>(name.data());
    for (std::size_t i = hash(key);; i = (i + 1) % kSlots) {
      const auto seen = keys_[i].load(std::memory_order_acquire);
      if (seen == key && sizes_[i].load(std::memory_order_relaxed) == name.size()) {
        return ids_[i].load(std::memory_order_relaxed);
      }
      if (seen == 0) return insert(name);
    }
  }
  std::string name(std::uint16_t id) {
    std::lock_guard lock(mutex_);
    return id > 0 && id < names_.size() ? names_[id] : std::string();
  }

 private:
  static constexpr std::size_t kSlots = 2 * std::size_t{kMaxIds} + 2;  // never full
  static std::size_t hash(std::uintptr_t key) { return (key >> 3) * 0x9e3779b97f4a7c15 % kSlots; }
  std::uint16_t insert(std::string_view name) {
    std::lock_guard lock(mutex_);
    const auto key = reinterpret_cast<std::uintptr_t>(name.data());
    std::size_t i = hash(key);
    for (; keys_[i].load(std::memory_order_relaxed) != 0; i = (i + 1) % kSlots) {
      if (keys_[i].load(std::memory_order_relaxed) == key &&
          sizes_[i].load(std::memory_order_relaxed) == name.size()) {
        return ids_[i].load(std::memory_order_relaxed);
      }
    }
    if (names_.size() > kMaxIds) return 0;
    const auto id = static_cast<std::uint16_t>(names_.size());
    names_.emplace_back(name);
    sizes_[i].store(name.size(), std::memory_order_relaxed);
    ids_[i].store(id, std::memory_order_relaxed);
    keys_[i].store(key, std::memory_order_release);
    return id;
  }
  std::array<std::atomic<std::uintptr_t>, kSlots> keys_{};
  std::array<std::atomic<std::size_t>, kSlots> sizes_{};
  std::array<std::atomic<std::uint16_t>, kSlots> ids_{};
  std::mutex mutex_;
  std::vector<std::string> names_{std::string()};  // id 0: none
};

NameIds<511>& algorithm_ids() {
  static auto* ids = new NameIds<511>;
  return *ids;
}
NameIds<63>& path_ids() {
  static auto* ids = new NameIds<63>;
  return *ids;
}
constexpr int kAlgorithmShift = 49;
constexpr int kPathShift = 58;

// tag + 1 (25 bits: every user tag and none) | dtype (8) | op + 1 (8) | state (8),
// and the choice's algorithm (9) and path (6) once noted.
std::uint64_t pack(const RecordedCall& call, State state) {
  const auto tag = static_cast<std::uint64_t>(call.tag + 1) & 0x1ffffff;
  return (tag << 24) | (static_cast<std::uint64_t>(call.dtype) << 16) |
         (static_cast<std::uint64_t>(static_cast<std::uint8_t>(call.op + 1)) << 8) |
         static_cast<std::uint64_t>(state);
}

std::uint64_t coarse_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000 +
         static_cast<std::uint64_t>(now.tv_nsec);
}

std::uint64_t precise_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000 +
         static_cast<std::uint64_t>(now.tv_nsec);
}

std::uint64_t unix_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

// A trace's timestamp: microseconds in fixed notation to the nanosecond
// (wall-clock microseconds are 16 digits: as a double, a JSON writer would
// print them with an exponent and lose the nanoseconds).
void append_number(std::string& out, std::uint64_t value) {
  char digits[24];
  out.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
}

void append_microseconds(std::string& out, std::int64_t ns) {
  char text[32];
  char* end = std::to_chars(text, text + sizeof text, ns / 1000).ptr;
  const auto fraction = std::abs(ns % 1000);
  *end++ = '.';
  *end++ = static_cast<char>('0' + fraction / 100);
  *end++ = static_cast<char>('0' + fraction / 10 % 10);
  *end++ = static_cast<char>('0' + fraction % 10);
  out.append(text, end);
}

bool write_all(int fd, std::string_view text) {
  for (std::size_t done = 0; done < text.size();) {
    const auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// The process record's service pipe, for the SIGUSR1 handler.
int dump_signal_fd = -1;

void on_dump_signal(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] const auto written = ::write(dump_signal_fd, &byte, 1);
  errno = saved;
}

// Which records are alive, so a thread that ends hands its ring back only
// to a record that still exists (leaked: threads end after static destruction).
std::mutex& records_mutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}
std::map<std::uint64_t, CallRecord*>& live_records() {
  static auto* records = new std::map<std::uint64_t, CallRecord*>;
  return *records;
}
std::uint64_t next_serial() {
  static std::atomic<std::uint64_t> serial{0};
  return serial.fetch_add(1) + 1;
}

}  // namespace

struct CallRecord::Ring {
  // One entry, one cache line, written by its ring's thread only and read by
  // dumps: every field is an atomic (plain stores on x86). `version` is
  // 2 x index + 1 while call `index` is written into it, 2 x index + 2 once
  // it is whole, which brackets a consistent read and says whose it is.
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> version{0};
    std::atomic<std::uint64_t> operation{0};       // const char*
    std::atomic<std::uint64_t> group_and_peer{0};  // group (32 bits) | peer + 1 (32)
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> sequence{0};
    std::atomic<std::uint64_t> start_ns{0};
    std::atomic<std::uint64_t> packed{0};  // a single word: the state may change alone
    std::atomic<std::uint64_t> end_ns{0};  // set before the call counts as ended
  };
  static std::uint64_t whole(std::uint64_t index) { return 2 * index + 2; }

  // `entries` is a power of two.
  Ring(std::size_t entries, std::uint32_t number) : slots(entries), mask(entries - 1), id(number) {}
  std::vector<Slot> slots;  // value-initialised: every page touched once, here
  const std::uint64_t mask;
  std::atomic<std::uint64_t> begun{0};
  // Calls end in the order they began (one thread's, none inside another),
  // so one count says which are done: an entry at or past it still runs.
  std::atomic<std::uint64_t> ended{0};
  // With RLX_TRACE: the calls written to the trace so far. A call never
  // overwrites one not yet written: its thread writes the trace first.
  std::atomic<std::uint64_t> traced{0};
  const std::uint32_t id;

  void mark_ended(std::uint64_t index) {
    if (index + 1 > ended.load(std::memory_order_relaxed)) {
      ended.store(index + 1, std::memory_order_release);
    }
  }
  void mark_failed(std::uint64_t index) {
    Slot& s = slots[index & mask];
    s.packed.store(
        s.packed.load(std::memory_order_relaxed) | static_cast<std::uint64_t>(State::failed),
        std::memory_order_release);
  }
};

// A thread's ring, handed back to its record when the thread ends.
struct RingLease {
  std::uint64_t serial = 0;
  CallRecord::Ring* ring = nullptr;
  ~RingLease();
  void give_back() {
    if (ring == nullptr) return;
    std::lock_guard lock(records_mutex());
    if (auto it = live_records().find(serial); it != live_records().end()) {
      it->second->release(ring);
    }
    ring = nullptr;
  }
};

namespace {
// What the hot path reads (trivial, so reading it costs no TLS wrapper call),
// and the lease that hands the ring back when the thread ends.
struct ThisThreadRing {
  std::uint64_t serial = 0;
  CallRecord::Ring* ring = nullptr;
};
thread_local ThisThreadRing this_thread_ring;
thread_local RingLease this_thread_lease;
// this_thread_ring's serial once the thread's lease is gone: calls made
// later (destructors of other thread_locals, static destruction) go
// unrecorded rather than into a ring another thread may have taken.
constexpr std::uint64_t kThreadEnded = ~std::uint64_t{0};
}  // namespace

RingLease::~RingLease() {
  give_back();
  this_thread_ring = {kThreadEnded, nullptr};
}

CallRecord& CallRecord::process() {
  static CallRecord* const instance = [] {
    launch_env::RecordSettings settings;
    try {
      settings = launch_env::record_settings(
          [](const char* name) -> const char* { return std::getenv(name); });
    } catch (const CollectiveError&) {
      // rlx::init reports the malformed setting; the record keeps its defaults.
    }
    auto* record = new CallRecord(settings.entries, settings.dump_dir, settings.trace_dir);
    record->answer_dump_signal();
    if (!settings.trace_dir.empty()) std::atexit([] { process().write_trace(true, true); });
    ::pthread_atfork(
        [] {
          process().trace_mutex_.lock();
          records_mutex().lock();
          process().mutex_.lock();
        },
        [] {
          process().mutex_.unlock();
          records_mutex().unlock();
          process().trace_mutex_.unlock();
        },
        [] {
          // The child has no service thread, and its dumps would overwrite
          // its parent's.
          dump_signal_fd = -1;
          process().dumps_off_ = true;
          process().trace_fd_ = -1;  // the parent's: the child never writes it
          process().trace_finished_ = true;
          process().tracing_ = false;
          process().mutex_.unlock();
          records_mutex().unlock();
          process().trace_mutex_.unlock();
        });
    return record;
  }();
  return *instance;
}

namespace {
std::string absolute_or_empty(const std::string& dir) {
  return dir.empty() ? "" : std::filesystem::absolute(dir).lexically_normal().string();
}
}  // namespace

CallRecord::CallRecord(std::size_t entries, std::string dump_dir, std::string trace_dir)
    : entries_(entries > 0 ? std::bit_ceil(entries) : 0),
      dump_dir_(absolute_or_empty(dump_dir)),
      trace_dir_(entries_ > 0 ? absolute_or_empty(trace_dir) : ""),
      precise_clock_(!trace_dir_.empty()),
      serial_(next_serial()) {
  {
    std::lock_guard lock(records_mutex());
    live_records()[serial_] = this;
  }
  tracing_.store(!trace_dir_.empty(), std::memory_order_relaxed);
  if (dump_dir_.empty() && trace_dir_.empty()) return;
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) return;
  now_ns_.store(coarse_ns(), std::memory_order_relaxed);
  dump_requested();  // a request older than this process is not for it
  // Signals go to the program's threads, never to this one: a handler that
  // exits from inside a trace write would wait on the trace at exit.
  sigset_t all{}, before{};
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &before);
  service_ = std::thread([this] { serve(); });
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

CallRecord::~CallRecord() {
  {
    std::lock_guard lock(records_mutex());
    live_records().erase(serial_);
  }
  if (service_.joinable()) {
    stopping_ = true;
    const char byte = 0;
    [[maybe_unused]] const auto written = ::write(wake_[1], &byte, 1);
    service_.join();
  }
  flush_trace(true);
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

void CallRecord::serve() {
  int tick_ms = kTickMs;
  while (!stopping_.load()) {
    pollfd wake{wake_[0], POLLIN, 0};
    const int ready = ::poll(&wake, 1, tick_ms);
    now_ns_.store(coarse_ns(), std::memory_order_relaxed);
    if (stopping_.load()) return;
    bool signalled = false;
    if (ready > 0) {
      char bytes[64];
      const auto got = ::read(wake_[0], bytes, sizeof bytes);
      signalled = got > 0 && std::find(bytes, bytes + got, 1) != bytes + got;
    }
    if (signalled) dump("SIGUSR1");
    if (!dump_dir_.empty() && dump_requested()) dump("asked for (the dump request file)");
    if (!trace_dir_.empty()) tick_ms = write_trace(false) > entries_ / 4 ? kBusyTickMs : kTickMs;
  }
}

bool CallRecord::dump_requested() {
  struct stat request {};
  const std::string path = dump_dir_ + "/" + std::string(launch_env::kDumpRequestFile);
  if (::stat(path.c_str(), &request) != 0) return false;
  const std::int64_t touched =
      std::int64_t{request.st_mtim.tv_sec} * 1'000'000'000 + request.st_mtim.tv_nsec;
  std::lock_guard lock(dump_mutex_);
  if (touched <= request_seen_ns_) return false;
  request_seen_ns_ = touched;
  return true;
}

void CallRecord::answer_dump_signal() {
  if (!service_.joinable() || dump_dir_.empty()) return;
  struct sigaction current {};
  if (::sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) return;
  dump_signal_fd = wake_[1];
  struct sigaction handler {};
  handler.sa_handler = on_dump_signal;
  sigemptyset(&handler.sa_mask);
  handler.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &handler, nullptr);
}

namespace {
thread_local const CallRecord::SplitScope* this_thread_split = nullptr;
}  // namespace

CallRecord::SplitScope::SplitScope(std::uint32_t parent_group, std::string split_suffix,
                                   std::vector<int> split_members)
    : parent(parent_group),
      suffix(std::move(split_suffix)),
      members(std::move(split_members)),
      outer_(this_thread_split) {
  this_thread_split = this;
}

CallRecord::SplitScope::~SplitScope() { this_thread_split = outer_; }

std::uint32_t CallRecord::add_group(std::string label, int rank, std::vector<int> world_ranks) {
  std::lock_guard lock(mutex_);
  if (const SplitScope* split = this_thread_split) {
    const Group* parent = find_group(split->parent);
    label = (parent != nullptr ? parent->label : "#" + std::to_string(split->parent)) + "/" +
            split->suffix;
    world_ranks.clear();
    for (int member : split->members) {
      const bool known = parent != nullptr && member >= 0 &&
                         static_cast<std::size_t>(member) < parent->world_ranks.size();
      world_ranks.push_back(known ? parent->world_ranks[static_cast<std::size_t>(member)] : -1);
    }
  }
  if (groups_.size() >= kKeptGroups) forget_a_group();
  const std::uint32_t id = next_group_++;
  groups_[id] = {std::move(label), rank, std::move(world_ranks)};
  return id;
}

void CallRecord::close_group(std::uint32_t group) {
  std::lock_guard lock(mutex_);
  if (Group* g = find_group(group)) g->open = false;
}

void CallRecord::forget_a_group() {
  // The oldest closed group, else the oldest; never the world group, which
  // names the dump's rank.
  auto victim = groups_.end();
  for (auto it = groups_.begin(); it != groups_.end(); ++it) {
    if (it->first == 0) continue;
    if (victim == groups_.end()) victim = it;
    if (!it->second.open) {
      victim = it;
      break;
    }
  }
  if (victim != groups_.end()) groups_.erase(victim);
}

CallRecord::Group* CallRecord::find_group(std::uint32_t id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : &it->second;
}

CallRecord::Ring* CallRecord::lease_ring() {
  if (this_thread_ring.serial == kThreadEnded) return nullptr;
  RingLease& lease = this_thread_lease;
  lease.give_back();
  lease.serial = serial_;
  {
    std::lock_guard lock(mutex_);
    if (!free_rings_.empty()) {
      lease.ring = free_rings_.back();
      free_rings_.pop_back();
    } else if (rings_.size() < kMaxRings) {
      rings_.push_back(std::make_unique<Ring>(entries_, static_cast<std::uint32_t>(rings_.size())));
      lease.ring = rings_.back().get();
    }
  }
  this_thread_ring = {serial_, lease.ring};
  return lease.ring;
}

void CallRecord::release(Ring* ring) {
  std::lock_guard lock(mutex_);
  free_rings_.push_back(ring);
}

CallRecord::Ticket CallRecord::begin(std::uint32_t group, const RecordedCall& call,
                                     std::uint64_t sequence) {
  return begin_as(group, call, sequence, State::running);
}

void CallRecord::posted(std::uint32_t group, const RecordedCall& call) {
  end(begin_as(group, call, 0, State::posted));
}

CallRecord::Ticket CallRecord::begin_as(std::uint32_t group, const RecordedCall& call,
                                        std::uint64_t sequence, State state) {
  if (entries_ == 0) return {};
  Ring* ring = this_thread_ring.serial == serial_ ? this_thread_ring.ring : lease_ring();
  if (ring == nullptr) return {};
  const std::uint64_t index = ring->begun.load(std::memory_order_relaxed);
  if (tracing_.load(std::memory_order_relaxed) &&
      index >= ring->traced.load(std::memory_order_acquire) + ring->slots.size()) [[unlikely]] {
    write_trace(false);
  }
  Ring::Slot& s = ring->slots[index & ring->mask];
  s.version.store(Ring::whole(index) - 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.operation.store(reinterpret_cast<std::uintptr_t>(call.operation), std::memory_order_relaxed);
  s.group_and_peer.store((std::uint64_t{group} << 32) | static_cast<std::uint32_t>(call.peer + 1),
                         std::memory_order_relaxed);
  s.count.store(call.count, std::memory_order_relaxed);
  s.sequence.store(sequence, std::memory_order_relaxed);
  s.start_ns.store(clock(), std::memory_order_relaxed);
  s.packed.store(pack(call, state), std::memory_order_relaxed);
  s.end_ns.store(0, std::memory_order_relaxed);  // not the slot's older call's
  s.version.store(Ring::whole(index), std::memory_order_release);
  ring->begun.store(index + 1, std::memory_order_release);
  return {ring, index};
}

std::uint64_t CallRecord::clock() const {
  return precise_clock_ ? precise_ns() : now_ns_.load(std::memory_order_relaxed);
}

void CallRecord::end(Ticket ticket) {
  if (ticket.ring == nullptr) return;
  ticket.ring->slots[ticket.index & ticket.ring->mask].end_ns.store(clock(),
                                                                    std::memory_order_relaxed);
  ticket.ring->mark_ended(ticket.index);
}

void CallRecord::note_choice(std::string_view algorithm, std::string_view path) {
  if (entries_ == 0 || this_thread_ring.serial != serial_ || this_thread_ring.ring == nullptr) {
    return;
  }
  Ring& ring = *this_thread_ring.ring;
  const std::uint64_t begun = ring.begun.load(std::memory_order_relaxed);
  if (begun == 0 || begun - 1 < ring.ended.load(std::memory_order_relaxed)) return;  // none runs
  Ring::Slot& s = ring.slots[(begun - 1) & ring.mask];
  const std::uint64_t packed = s.packed.load(std::memory_order_relaxed);
  if ((packed >> kAlgorithmShift) != 0) return;
  // A thread's calls mostly make the choice its last call made.
  thread_local struct {
    const char* algorithm = nullptr;
    const char* path = nullptr;
    std::uint64_t bits = 0;
  } last;
  if (algorithm.data() != last.algorithm || path.data() != last.path) {
    last = {algorithm.data(), path.data(),
            (std::uint64_t{algorithm_ids().id_of(algorithm)} << kAlgorithmShift) |
                (std::uint64_t{path_ids().id_of(path)} << kPathShift)};
  }
  s.packed.store(packed | last.bits, std::memory_order_release);
}

void CallRecord::fail(Ticket ticket, const std::exception_ptr& error) noexcept {
  if (ticket.ring == nullptr) return;
  // The error first: a trace may write the entry as soon as it has ended.
  try {
    std::string text = "unknown error";
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      text = e.what();
    } catch (...) {
    }
    {
      std::lock_guard lock(mutex_);
      if (failures_.size() == kKeptFailures) failures_.pop_front();
      failures_.push_back({ticket.ring, ticket.index, std::move(text)});
    }
  } catch (...) {
    // No memory for the text: the entry still says it failed.
  }
  ticket.ring->slots[ticket.index & ticket.ring->mask].end_ns.store(clock(),
                                                                    std::memory_order_relaxed);
  ticket.ring->mark_failed(ticket.index);
  ticket.ring->mark_ended(ticket.index);
  dump("a call failed");
  flush_trace(false);
}

namespace {

// An entry read whole from a ring, and where it sorts.
struct ReadEntry {
  std::uint64_t start_ns;
  const CallRecord::Ring* ring;
  std::uint64_t index;
  nlohmann::json json;

  // A thread's calls keep their order (its clock never goes back, and the
  // sort is stable); calls of other threads go by when they started.
  bool operator<(const ReadEntry& other) const { return start_ns < other.start_ns; }
};

constexpr auto kReplaceBadUtf8 = nlohmann::json::error_handler_t::replace;

State state_of(std::uint64_t packed, std::uint64_t index, std::uint64_t ended) {
  const auto recorded = static_cast<State>(packed & 0xff);
  if (recorded == State::failed || recorded == State::posted) return recorded;
  return index < ended ? State::done : State::running;
}

}  // namespace

// One entry as read whole from a ring.
struct CallRecord::SlotCopy {
  std::uint64_t operation, group_and_peer, count, sequence, start_ns, end_ns, packed;
};

namespace {

using SlotCopy = CallRecord::SlotCopy;

// Entry `index` of `ring`, unless it is being written or a newer call's.
std::optional<SlotCopy> read_slot(const CallRecord::Ring& ring, std::uint64_t index) {
  const CallRecord::Ring::Slot& s = ring.slots[index & ring.mask];
  const auto version = s.version.load(std::memory_order_acquire);
  if (version != CallRecord::Ring::whole(index)) return std::nullopt;
  const SlotCopy copy{
      s.operation.load(std::memory_order_relaxed), s.group_and_peer.load(std::memory_order_relaxed),
      s.count.load(std::memory_order_relaxed),     s.sequence.load(std::memory_order_relaxed),
      s.start_ns.load(std::memory_order_relaxed),  s.end_ns.load(std::memory_order_relaxed),
      s.packed.load(std::memory_order_relaxed)};
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.version.load(std::memory_order_relaxed) != version) return std::nullopt;
  return copy;
}

// An entry's fields as dumps and traces show them.
nlohmann::json entry_json(const SlotCopy& c, State state, std::uint32_t thread) {
  nlohmann::json entry = {{"group", c.group_and_peer >> 32},
                          {"call", reinterpret_cast<const char*>(c.operation)},
                          {"sequence", c.sequence},
                          {"count", c.count},
                          {"dtype", name_of(static_cast<Dtype>((c.packed >> 16) & 0xff))},
                          {"state", name_of(state)},
                          {"thread", thread}};
  if (c.start_ns != 0) entry["start_ns"] = c.start_ns;
  if (state != State::running && c.end_ns != 0) entry["end_ns"] = c.end_ns;
  if (const int op = static_cast<int>((c.packed >> 8) & 0xff) - 1; op >= 0) {
    entry["op"] = name_of(static_cast<ReduceOp>(op));
  }
  if (const auto peer = static_cast<std::int64_t>(c.group_and_peer & 0xffffffff) - 1; peer >= 0) {
    entry["peer"] = peer;
  }
  if (const auto tag = static_cast<std::int64_t>((c.packed >> 24) & 0x1ffffff) - 1; tag >= 0) {
    entry["tag"] = tag;
  }
  const auto algorithm = static_cast<std::uint16_t>((c.packed >> kAlgorithmShift) & 0x1ff);
  if (algorithm != 0) {
    entry["algorithm"] = algorithm_ids().name(algorithm);
    entry["path"] = path_ids().name(static_cast<std::uint16_t>(c.packed >> kPathShift));
  }
  return entry;
}

// One ring's entries that read whole (not being written, not a newer call's).
void read_entries(const CallRecord::Ring& ring, std::vector<ReadEntry>& out) {
  const std::uint64_t ended = ring.ended.load(std::memory_order_acquire);
  const std::uint64_t begun = ring.begun.load(std::memory_order_acquire);
  const std::uint64_t kept = ring.slots.size();
  for (std::uint64_t index = begun > kept ? begun - kept : 0; index < begun; ++index) {
    const auto copy = read_slot(ring, index);
    if (!copy) continue;
    out.push_back({copy->start_ns, &ring, index,
                   entry_json(*copy, state_of(copy->packed, index, ended), ring.id)});
  }
}

}  // namespace

std::string CallRecord::to_json(std::string_view reason) {
  std::lock_guard lock(mutex_);
  std::vector<ReadEntry> read;
  std::uint64_t overwritten = 0;
  for (const auto& ring : rings_) {
    const std::uint64_t begun = ring->begun.load(std::memory_order_acquire);
    overwritten += begun > ring->slots.size() ? begun - ring->slots.size() : 0;
    read_entries(*ring, read);
  }
  // Oldest first across threads; the newest kMaxDumpedCalls of them.
  std::stable_sort(read.begin(), read.end());
  if (read.size() > launch_env::kMaxDumpedCalls) {
    overwritten += read.size() - launch_env::kMaxDumpedCalls;
    read.erase(read.begin(), read.end() - static_cast<std::ptrdiff_t>(launch_env::kMaxDumpedCalls));
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& [id, g] : groups_) {
    groups.push_back({{"id", id},
                      {"label", g.label},
                      {"rank", g.rank},
                      {"world_ranks", g.world_ranks},
                      {"open", g.open}});
  }
  const Group* world = find_group(0);
  const nlohmann::json head = {
      {"rlx_record", 1},
      {"rank", world != nullptr ? world->rank : -1},
      {"world_size", world != nullptr ? world->world_ranks.size() : 0},
      {"host", host_name()},
      {"pid", ::getpid()},
      {"reason", reason},
      {"clock", precise_clock_ ? "CLOCK_MONOTONIC" : "CLOCK_MONOTONIC_COARSE"},
      {"now_ns", precise_clock_ ? precise_ns() : coarse_ns()},
      {"now_unix_ns", unix_ns()},
      {"overwritten_calls", overwritten},
      {"groups", std::move(groups)}};
  // Compact, one call a line: a person can read it, and it stays small.
  std::string text = head.dump(-1, ' ', false, kReplaceBadUtf8);
  text.pop_back();  // the closing brace
  text += ",\"calls\":[";
  const char* separator = "\n";
  for (auto& entry : read) {
    for (const auto& failure : failures_) {
      if (failure.ring == entry.ring && failure.index == entry.index) {
        entry.json["error"] = failure.text;
      }
    }
    text += separator + entry.json.dump(-1, ' ', false, kReplaceBadUtf8);
    separator = ",\n";
  }
  return text + "\n]}\n";
}

std::string CallRecord::dump(std::string_view reason) noexcept {
  if (dump_dir_.empty() || dumps_off_.load()) return "";
  try {
    std::lock_guard writing(dump_mutex_);  // a later snapshot never goes under an older one
    const std::string text = to_json(reason);
    int rank = -1;
    {
      std::lock_guard lock(mutex_);
      if (const Group* world = find_group(0)) rank = world->rank;
    }
    const std::string name =
        rank >= 0 ? "rank-" + std::to_string(rank) : "pid-" + std::to_string(::getpid());
    const std::string path = dump_dir_ + "/" + name + ".json";
    const std::string partial = dump_dir_ + "/." + name + "." + std::to_string(::getpid()) + "." +
                                std::to_string(++dumps_written_) + ".partial";
    std::error_code ignored;
    std::filesystem::create_directories(dump_dir_, ignored);
    // A name of its own, never through a link someone left in a shared directory.
    const int fd =
        ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    bool written = fd >= 0 && write_all(fd, text);
    if (fd >= 0) written = ::close(fd) == 0 && written;
    if (written && std::rename(partial.c_str(), path.c_str()) == 0) return path;
    const std::string cause = std::strerror(errno);
    ::unlink(partial.c_str());
    log_lazily(LogLevel::warn, [&] {
      return "could not write the flight record to " + path + " (RLX_DUMP_DIR): " + cause;
    });
  } catch (const std::exception& e) {
    log_lazily(LogLevel::warn, [&] {
      return std::string("could not write the flight record (RLX_DUMP_DIR): ") + e.what();
    });
  }
  return "";
}

void CallRecord::flush_trace(bool finish) noexcept { write_trace(finish); }

void CallRecord::stop_tracing() {
  trace_finished_ = true;
  tracing_.store(false, std::memory_order_relaxed);
}

std::size_t CallRecord::write_trace(bool finish, bool at_exit) noexcept {
  std::unique_lock lock(trace_mutex_, std::defer_lock);
  if (!at_exit) {
    lock.lock();
  } else {
    // A thread that exits from a signal handler may hold the trace already:
    // exit goes on without the rest of the trace rather than hang.
    for (int tries = 0; !lock.try_lock(); ++tries) {
      if (tries == 1000) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (trace_finished_ || trace_dir_.empty()) return 0;
  std::size_t most = 0;
  try {
    if (trace_fd_ < 0 && !open_trace()) {
      if (finish) stop_tracing();
      return 0;
    }
    {
      std::lock_guard rings(mutex_);
      for (const auto& ring : rings_) most = std::max(most, trace_ring(*ring, finish));
    }
    if (finish && trace_lost_ > 0) {
      const std::string lost =
          std::to_string(trace_lost_) + " calls were overwritten before they were traced";
      std::string note =
          nlohmann::json(
              {{"name", "rlx: " + lost}, {"ph", "i"}, {"s", "p"}, {"pid", trace_rank_}, {"tid", 0}})
              .dump();
      note.pop_back();
      trace_buffer_ += ",\n" + note + ",\"ts\":";
      append_microseconds(trace_buffer_,
                          static_cast<std::int64_t>(precise_ns()) + trace_unix_offset_ns_);
      trace_buffer_ += "}";
      log(LogLevel::warn, "RLX_TRACE: " + lost);
    }
    if (finish) trace_buffer_ += "\n]\n";
  } catch (...) {
    // Out of memory: what was formatted still goes out.
  }
  if (!write_all(trace_fd_, trace_buffer_)) {
    const std::string cause = std::strerror(errno);
    log_lazily(LogLevel::warn, [&] {
      return "could not write the trace into " + trace_dir_ + " (RLX_TRACE): " + cause +
             "; the rest of this rank's calls go untraced";
    });
    finish = true;
  }
  trace_buffer_.clear();
  if (finish) {
    ::close(trace_fd_);
    trace_fd_ = -1;
    stop_tracing();
  }
  return most;
}

bool CallRecord::open_trace() {
  {
    std::lock_guard lock(mutex_);
    const Group* world = find_group(0);
    if (world == nullptr) return false;  // no group yet, so no call either
    trace_rank_ = world->rank;
  }
  std::error_code ignored;
  std::filesystem::create_directories(trace_dir_, ignored);
  const std::string path = trace_dir_ + "/" + std::string(launch_env::kTraceFilePrefix) +
                           std::to_string(trace_rank_) + ".json";
  // A file of its own (never through a link, a FIFO or a file someone else
  // made there), renamed into place.
  const std::string partial = trace_dir_ + "/." + std::string(launch_env::kTraceFilePrefix) +
                              std::to_string(trace_rank_) + "." + std::to_string(::getpid()) +
                              ".partial";
  ::unlink(partial.c_str());
  trace_fd_ = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (trace_fd_ >= 0 && std::rename(partial.c_str(), path.c_str()) != 0) {
    const int cause = errno;
    ::close(trace_fd_);
    ::unlink(partial.c_str());
    trace_fd_ = -1;
    errno = cause;
  }
  if (trace_fd_ < 0) {
    const std::string cause = std::strerror(errno);
    log_lazily(LogLevel::warn,
               [&] { return "could not write the trace to " + path + " (RLX_TRACE): " + cause; });
    stop_tracing();
    return false;
  }
  trace_unix_offset_ns_ =
      static_cast<std::int64_t>(unix_ns()) - static_cast<std::int64_t>(precise_ns());
  const std::string process = "rank " + std::to_string(trace_rank_) + " (" + host_name() +
                              ", pid " + std::to_string(::getpid()) + ")";
  trace_buffer_ = "[\n" +
                  nlohmann::json({{"name", "process_name"},
                                  {"ph", "M"},
                                  {"pid", trace_rank_},
                                  {"args", {{"name", process}}}})
                      .dump(-1, ' ', false, kReplaceBadUtf8) +
                  ",\n" +
                  nlohmann::json({{"name", "process_sort_index"},
                                  {"ph", "M"},
                                  {"pid", trace_rank_},
                                  {"args", {{"sort_index", trace_rank_}}}})
                      .dump();
  return true;
}

namespace {

// A JSON string for text rlx did not write itself (labels, error messages).
void append_quoted(std::string& out, const std::string& text) {
  out += nlohmann::json(text).dump(-1, ' ', false, kReplaceBadUtf8);
}

}  // namespace

// Formatted by hand: a call is a line of a few hundred bytes, and a trace of
// a tight loop has millions of them.
void CallRecord::append_trace_event(const SlotCopy& c, State state, const Ring& ring,
                                    std::uint64_t index) {
  const auto group = c.group_and_peer >> 32;
  const std::uint64_t tid = group * kMaxRings + ring.id;
  if (tracks_.insert(tid).second) {
    const Group* g = find_group(static_cast<std::uint32_t>(group));
    std::string& out = trace_buffer_;
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":";
    out += std::to_string(trace_rank_);
    out += ",\"tid\":";
    append_number(out, tid);
    out += ",\"args\":{\"name\":";
    append_quoted(out, (g != nullptr ? g->label : "group " + std::to_string(group)) + " · thread " +
                           std::to_string(ring.id));
    out += "}}";
  }
  const std::string_view call = reinterpret_cast<const char*>(c.operation);
  const std::uint64_t end = state == State::running ? precise_ns() : c.end_ns;
  std::string& out = trace_buffer_;
  out += ",\n{\"name\":\"";
  out += call;
  out += call.ends_with("send") || call.ends_with("recv") ? "\",\"cat\":\"point_to_point"
                                                          : "\",\"cat\":\"collective";
  out += "\",\"ph\":\"X\",\"pid\":";
  append_number(out, static_cast<std::uint64_t>(trace_rank_));
  out += ",\"tid\":";
  append_number(out, tid);
  out += ",\"ts\":";
  append_microseconds(out, static_cast<std::int64_t>(c.start_ns) + trace_unix_offset_ns_);
  out += ",\"dur\":";
  append_microseconds(out, static_cast<std::int64_t>(end > c.start_ns ? end - c.start_ns : 0));
  out += ",\"args\":{\"sequence\":";
  append_number(out, c.sequence);
  out += ",\"count\":";
  append_number(out, c.count);
  out += ",\"dtype\":\"";
  out += name_of(static_cast<Dtype>((c.packed >> 16) & 0xff));
  out += "\",\"state\":\"";
  out += name_of(state);
  out += "\"";
  if (const int op = static_cast<int>((c.packed >> 8) & 0xff) - 1; op >= 0) {
    out += ",\"op\":\"";
    out += name_of(static_cast<ReduceOp>(op));
    out += "\"";
  }
  if (const auto peer = static_cast<std::int64_t>(c.group_and_peer & 0xffffffff) - 1; peer >= 0) {
    out += ",\"peer\":" + std::to_string(peer);
  }
  if (const auto tag = static_cast<std::int64_t>((c.packed >> 24) & 0x1ffffff) - 1; tag >= 0) {
    out += ",\"tag\":" + std::to_string(tag);
  }
  if (const auto algorithm = static_cast<std::uint16_t>((c.packed >> kAlgorithmShift) & 0x1ff)) {
    const auto path = static_cast<std::uint16_t>(c.packed >> kPathShift);
    std::string& choice = trace_choices_[std::uint32_t{algorithm} << 16 | path];
    if (choice.empty()) {
      choice = ",\"algorithm\":";
      append_quoted(choice, algorithm_ids().name(algorithm));
      choice += ",\"path\":";
      append_quoted(choice, path_ids().name(path));
    }
    out += choice;
  }
  for (const auto& failure : failures_) {
    if (failure.ring != &ring || failure.index != index) continue;
    out += ",\"error\":";
    append_quoted(out, failure.text);
  }
  out += "}}";
}

std::size_t CallRecord::trace_ring(Ring& ring, bool finish) {
  const std::uint64_t ended = ring.ended.load(std::memory_order_acquire);
  const std::uint64_t begun = ring.begun.load(std::memory_order_acquire);
  std::uint64_t cursor = ring.traced.load(std::memory_order_relaxed);
  const std::uint64_t oldest = begun > ring.slots.size() ? begun - ring.slots.size() : 0;
  if (cursor < oldest) {
    trace_lost_ += oldest - cursor;
    cursor = oldest;
  }
  const std::uint64_t first = cursor;
  const std::uint64_t upto = std::max(cursor, finish ? begun : ended);
  for (; cursor < upto; ++cursor) {
    if (const auto copy = read_slot(ring, cursor)) {
      append_trace_event(*copy, state_of(copy->packed, cursor, ended), ring, cursor);
    } else {
      ++trace_lost_;
    }
  }
  ring.traced.store(cursor, std::memory_order_release);
  return static_cast<std::size_t>(upto - first);
}

}  // namespace rlx
