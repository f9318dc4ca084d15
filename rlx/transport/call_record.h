// The flight recorder: this process's last calls on every group, kept always,
// so that when a job fails each rank can say what it did and what it was
// doing. With RLX_DUMP_DIR set, a rank writes its record there as JSON (one
// file per rank, rewritten) when one of its calls fails and when it gets
// SIGUSR1; rlxrun sets the directory for its ranks and reads the files to
// name the culprit (rlx-analyze does the same for a directory of dumps;
// docs/RELIABILITY.md). With RLX_TRACE set, every call also goes into a
// Chrome trace (trace-rank-R.json), which rlxrun merges for the job.
//
// Each thread that makes calls writes a ring of its own (RLX_RECORD_CALLS
// entries), so recording is a few plain stores on the calling thread: no
// atomic read-modify-write, no clock read (a service thread, which runs only
// with a dump or trace directory, keeps the time a call starts and ends at,
// to 10 ms; a trace reads the clock itself), no allocation after a thread's
// first call (docs/BENCHMARKS.md has the cost). The trace is written by the
// service thread from the rings, so a ring must not wrap between two of its
// visits: it visits every 10 ms, every millisecond while calls come fast.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <vector>

#include "rlx/core/dtype.h"

namespace rlx {

// What a recorded call is. `operation` must have static storage (a literal).
struct RecordedCall {
  const char* operation = "";
  std::uint64_t count = 0;  // elements for collectives, bytes for point-to-point
  Dtype dtype = Dtype::u8;
  int op = -1;    // a ReduceOp, or -1 for calls that do not reduce
  int peer = -1;  // the root of a rooted collective, the peer of a send or receive
  std::int64_t tag = -1;
};

class CallRecord {
 public:
  // The process's record, set up from RLX_RECORD_CALLS and RLX_DUMP_DIR at
  // its first use (a transport's construction). With a directory, SIGUSR1
  // writes a dump, unless the program handles SIGUSR1 itself. Never
  // destroyed: transports closed during static destruction, and the
  // service thread, may still use it. A forked child writes no dumps.
  static CallRecord& process();

  // A record of the last `entries` calls of each thread (rounded up to a
  // power of two; 0 records nothing) that dumps into `dump_dir` (empty:
  // never) and traces into `trace_dir` (empty: no trace). Without either
  // there is no service thread.
  CallRecord(std::size_t entries, std::string dump_dir, std::string trace_dir = {});
  ~CallRecord();
  CallRecord(const CallRecord&) = delete;
  CallRecord& operator=(const CallRecord&) = delete;

  // A group as dumps describe it: `world_ranks` lists its members' ranks in
  // the group the job started with, in this group's rank order. Returns the
  // id calls name it by; the world group registers first, as id 0. Within
  // a SplitScope on this thread the group is that split instead.
  std::uint32_t add_group(std::string label, int rank, std::vector<int> world_ranks);
  // The group closed: it is forgotten first when too many are kept.
  void close_group(std::uint32_t group);

  // While it lives, a group this thread registers is `parent`'s split: its
  // label is the parent's and "/" `suffix` (the same on every member:
  // "world/0:1" is the first split's color 1), and `members` (ranks in
  // `parent`) become world ranks.
  class SplitScope {
   public:
    SplitScope(std::uint32_t parent, std::string suffix, std::vector<int> members);
    ~SplitScope();
    SplitScope(const SplitScope&) = delete;
    SplitScope& operator=(const SplitScope&) = delete;

    const std::uint32_t parent;
    const std::string suffix;
    const std::vector<int> members;

   private:
    const SplitScope* outer_;
  };

  // The record's insides (call_record.cc): a thread's ring, an entry read
  // from it, and a call's state.
  struct Ring;
  struct SlotCopy;
  enum class State : std::uint8_t;
  // An entry being recorded; `ring` is null when the call goes unrecorded.
  struct Ticket {
    Ring* ring = nullptr;
    std::uint64_t index = 0;
  };

  // Records that `call` started on `group` as its `sequence`-th recorded
  // collective. end() and fail() must come from the same thread.
  Ticket begin(std::uint32_t group, const RecordedCall& call, std::uint64_t sequence);
  // Records that `call` (an isend or irecv) was posted on `group`: it runs
  // on, and is recorded as "posted".
  void posted(std::uint32_t group, const RecordedCall& call);
  // Marks the entry done, or failed with `error` (then dumps, with a directory).
  void end(Ticket ticket);
  void fail(Ticket ticket, const std::exception_ptr& error) noexcept;
  // The call running on this thread goes by `algorithm` over `path` (both
  // with static storage: they are kept by address). A call keeps the first
  // choice it notes: the steps of a hierarchical call choose again.
  void note_choice(std::string_view algorithm, std::string_view path);

  // Writes the calls that ended since the last visit into the trace; with
  // `finish`, the running ones too, and closes it (later calls go untraced).
  // The process's record finishes its trace at exit.
  void flush_trace(bool finish) noexcept;

  // Writes the record into the dump directory as rank-R.json (R: the rank
  // in the world group), replacing an older dump; `reason` says why.
  // Returns the file's path, or "" when none was written (never throws: a
  // dump that cannot be written is a warning on stderr).
  std::string dump(std::string_view reason) noexcept;
  // The dump's JSON text (docs/RELIABILITY.md describes its fields).
  std::string to_json(std::string_view reason);

 private:
  struct Group {
    std::string label;
    int rank = -1;
    std::vector<int> world_ranks;
    bool open = true;
  };
  friend struct RingLease;
  Ticket begin_as(std::uint32_t group, const RecordedCall& call, std::uint64_t sequence,
                  State state);
  Ring* lease_ring();  // this thread's ring, the first time it records here
  void release(Ring* ring);
  Group* find_group(std::uint32_t id);  // mutex_ held
  void forget_a_group();                // mutex_ held
  void serve();
  bool dump_requested();
  void answer_dump_signal();
  std::uint64_t clock() const;
  // The most calls one ring had to write (how fast calls come).
  std::size_t write_trace(bool finish, bool at_exit = false) noexcept;
  bool open_trace();    // trace_mutex_ held
  void stop_tracing();  // trace_mutex_ held
  // The next calls of `ring` (trace_mutex_ and mutex_ held).
  std::size_t trace_ring(Ring& ring, bool finish);
  void append_trace_event(const SlotCopy& copy, State state, const Ring& ring, std::uint64_t index);

  const std::size_t entries_;
  const std::string dump_dir_;            // absolute
  const std::string trace_dir_;           // absolute
  const bool precise_clock_;              // a trace times calls to the nanosecond
  const std::uint64_t serial_;            // tells this record's rings from an older one's
  std::atomic<std::uint64_t> now_ns_{0};  // the service thread's clock, 0 without one
  std::atomic<bool> dumps_off_{false};    // in a forked child
  std::mutex mutex_;                      // guards what follows
  std::vector<std::unique_ptr<Ring>> rings_;
  std::vector<Ring*> free_rings_;  // their threads ended; entries kept until reused
  std::map<std::uint32_t, Group> groups_;
  std::uint32_t next_group_ = 0;
  struct Failure {
    const Ring* ring;
    std::uint64_t index;
    std::string text;
  };
  std::deque<Failure> failures_;  // the last few
  std::mutex dump_mutex_;         // one dump made at a time; guards what follows
  std::uint64_t dumps_written_ = 0;
  std::int64_t request_seen_ns_ = 0;  // the newest dump request answered (its mtime)
  int wake_[2] = {-1, -1};            // the service thread's pipe: a byte asks for a dump
  std::atomic<bool> tracing_{false};  // a trace is open, or will be at the first call
  std::mutex trace_mutex_;            // one writer of the trace at a time; guards what follows
  int trace_fd_ = -1;
  bool trace_finished_ = false;
  int trace_rank_ = -1;
  std::int64_t trace_unix_offset_ns_ = 0;               // wall clock minus the record's clock
  std::map<std::uint32_t, std::string> trace_choices_;  // algorithm << 16 | path: as written
  std::set<std::uint64_t> tracks_;                      // the tids named so far
  std::uint64_t trace_lost_ = 0;                        // overwritten before they were written
  std::string trace_buffer_;
  std::atomic<bool> stopping_{false};
  std::thread service_;
};

// Runs `work` (the call itself) recorded as `call`, the `sequence`-th
// recorded collective of `group`; returns what it returns.
template <class Work>
decltype(auto) run_recorded(std::uint32_t group, const RecordedCall& call, std::uint64_t sequence,
                            Work&& work) {
  CallRecord& record = CallRecord::process();
  const CallRecord::Ticket ticket = record.begin(group, call, sequence);
  try {
    if constexpr (std::is_void_v<decltype(work())>) {
      work();
      record.end(ticket);
    } else {
      decltype(auto) result = work();
      record.end(ticket);
      return result;
    }
  } catch (...) {
    record.fail(ticket, std::current_exception());
    throw;
  }
}

}  // namespace rlx
