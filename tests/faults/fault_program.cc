// One rank of a job that goes wrong on purpose; tests/faults/faults_test.cc
// (and tests/verbs/verbs_faults_test.cc, over RDMA) run N of these and check
// what each rank reports.
//
//   fault_program mismatch_size   rank 1 all_sums fewer elements than the rest
//   fault_program mismatch_kind   rank 0 enters a barrier, the rest an all_sum
//   fault_program mismatch_dtype  rank 1 all_sums i32, the rest f32 (same count)
//   fault_program mismatch_op     rank 1 reduces with max, the rest with sum
//   fault_program mismatch_by_one rank 1 all_sums one element more than the
//                                 rest's RLX_MISMATCH_COUNT (default 1000)
//   fault_program mismatch_gather rank 0 all_gathers, the rest all_sum
//   fault_program mismatch_root   rank 1 broadcasts from rank 1, the rest from rank 0
//                                 (then a barrier: where a root finished, it fails there)
//   fault_program mismatch_split  rank 1 splits the group, the rest all_sum
//   fault_program mismatch_gather_root  rank 1 gathers to itself, the rest to rank 0
//   fault_program mismatch_reduce_root  the last rank reduces to itself, the rest to rank 0
//   fault_program mismatch_broadcast_vs_barrier  the last rank enters a barrier, the
//                                 rest broadcast from rank 0 (then all a barrier)
//   fault_program mismatch_sum_vs_broadcast  rank RLX_ODD_RANK (default 0) all_sums 16
//                                 floats, the rest broadcast 16 from rank 0
//   fault_program mismatch_scatter_root  the last rank scatters from itself, the rest
//                                 from rank 0
//   fault_program mismatch_views  each rank's rooted call and root from
//                                 RLX_ROOTED_VIEWS ("broadcast:2,reduce:0,..."), then a barrier
//   fault_program mismatch_gather_v  rank 1 splits all_gather_v's total differently
//   fault_program mismatch_all_to_all_v  rank 1 expects one element more from rank 0
//   fault_program mismatch_nonblocking  mismatch_size through iall_sum(...).wait()
//   fault_program mismatch_all_to_all  rank 1 all_to_alls blocks one element
//                                 longer than the rest's
//   fault_program message_over_cap  (2 ranks, RLX_UNEXPECTED_BYTES=1048576) rank 0
//                                 sends 8 MiB that rank 1 already waits for, then 8 MiB
//                                 nobody waits for yet
//   fault_program peer_killed     the last rank kills itself mid-loop
//   fault_program compiled_peer_killed  the same between runs of a compiled graph
//                                 whose all-reduces run in the background while
//                                 the next micro-batch computes
//   fault_program skipped_collective  rank 1 skips the 4th of 6 all_sums, then all
//                                 call a barrier
//   fault_program stuck           the last rank sleeps a minute before its 4th all_sum
//   fault_program frozen          the last rank stops itself (SIGSTOP) mid-loop, and a
//                                 helper kills it 10 s (RLX_FREEZE_SECONDS) later; the others exit
//                                 3 once they report the timeout naming it (a failure for rlxrun)
//   fault_program send_to_frozen  (2 ranks) rank 1 stops (SIGSTOP) and rank 0 sends it
//                                 64 MiB: the send times out naming rank 1
//   fault_program recv_timeout    rank 0 waits for a message nobody sends
//   fault_program send_then_close (2 ranks) rank 1 sends messages of 4 B to
//                                 1 MiB and returns from main at once; rank 0
//                                 receives them only after rank 1 has closed
//   fault_program large_send_then_close (2 ranks) rank 1 sends 64 MiB, which rank 0
//                                 is already receiving into its buffer, then 3
//                                 small messages, and returns from main at once
//   fault_program irecv_peer_killed  the others post irecvs of 4 tags from the last
//                                 rank, which sends 3 of them, waits until they
//                                 arrived and kills itself: the 4th fails naming it
//   fault_program rooted_run_ahead  small gathers to rank 0 (which starts late), then
//                                 a receive from it; then small broadcasts from rank 0
//                                 (the last rank starts late), then a receive
//   fault_program run_ahead_killed  the last rank is killed RLX_KILL_AFTER_MS (default
//                                 150) into a loop of small gathers and broadcasts
//                                 whose roots move (ranks run ahead of each other)
//   fault_program run_ahead_frozen  the last rank stops (SIGSTOP) after RLX_FREEZE_AT
//                                 (default 100) calls of the same loop, and a helper
//                                 kills it 10 s (RLX_FREEZE_SECONDS) later; the others exit 3 as
//                                 for frozen
//   fault_program run_ahead_mismatch_then_receive  (2 ranks) rank 0 gathers to rank 1,
//                                 rank 1 broadcasts (both return at once), then both
//                                 receive what nobody sends: a timeout, and the close
//                                 logs the mismatch; with RLX_THEN_KILL=1 rank 1 is
//                                 killed next, and rank 0's close after peer_lost logs it
//   fault_program corrupt_calls_read  (2 ranks, one host) rank 1's count of calls read
//                                 is moved far ahead while it receives; rank 0's small
//                                 broadcasts need it: both fail with protocol_violation
//   fault_program corrupt_call_line  (2 ranks, one host) rank 1's call lines are
//                                 rewritten after rank 0's small broadcast returned
//                                 unchecked; rank 0's next call reads them: both fail
//                                 with protocol_violation
//   fault_program clean_exit      the last rank returns from main (closing its
//                                 group cleanly) while the others run all_sums
//   fault_program exit_after_collective  the last rank makes its part of an all_sum
//                                 of 4 MiB and exits at once (_Exit, no close): the
//                                 others' all_sum completes whole, and only their
//                                 next call fails, naming it
//   fault_program corrupt_ring_read     (2 ranks, one host) another hand moves the
//                                 consumer counter of rank 1's ring to rank 0 far ahead;
//                                 rank 1 then sends: both ranks fail with protocol_violation
//   fault_program corrupt_ring_written  the same with the producer counter; rank 0 receives
//   fault_program mismatch_sum_vs_gather_v  rank 1 calls all_gather_v, the rest all_sum
//   fault_program mismatch_sum_vs_all_to_all_v  rank 1 calls all_to_all_v, the rest all_sum
//   fault_program single_copy_killed  (RLX_TUNE forcing all_gather:single_copy) the
//                                 last rank is killed RLX_KILL_AFTER_MS (default 150)
//                                 into a loop of all_gathers of 4 MiB blocks, mid-read
//   fault_program single_copy_refused  rank 1's kernel refuses process_vm_readv (a
//                                 seccomp filter) from before rlx::init: single copy is
//                                 off for the host; forced, the all_gather fails on every
//                                 rank saying why, and the default runs right
//   fault_program single_copy_refused_later  the same filter from after rlx::init,
//                                 with RLX_TUNE forcing all_gather:single_copy: rank 1's
//                                 read fails, and every rank's all_gather with it
//   fault_program steady          correct collectives for RLX_STEADY_MS (default 2000)
//                                 or until RLX_STEADY_STOP_FILE exists (strangers
//                                 attack meanwhile), then the peak RSS
//
// Prints "RESULT kind=<error kind> ms=<time to the error> peer=<the rank the
// error blames>" and exits 0 when
// the expected error (or, for steady, every result) was seen; a mismatch must
// also name both calls, and leave the caller's buffer as it was.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rlx/rlx.h"
#include "rlx/transport/shm/node.h"

namespace {

using Clock = std::chrono::steady_clock;

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

// Runs `body`; reports the CollectiveError it throws; true if its kind is
// `expected` and its message holds every one of `fragments`.
template <class Body>
bool expect_error(rlx::ErrorKind expected, Body body,
                  std::initializer_list<std::string_view> fragments = {}) {
  const auto start = Clock::now();
  try {
    body();
    std::printf("RESULT kind=none ms=%lld\n", ms_since(start));
    return false;
  } catch (const rlx::CollectiveError& error) {
    std::printf("RESULT kind=%s ms=%lld peer=%d\nMESSAGE %s\n",
                std::string(name_of(error.kind())).c_str(), ms_since(start), error.peer(),
                error.what());
    bool named = true;
    for (std::string_view fragment : fragments) {
      if (std::string_view(error.what()).find(fragment) == std::string_view::npos) {
        std::printf("MISSING '%.*s' in the message\n", static_cast<int>(fragment.size()),
                    fragment.data());
        named = false;
      }
    }
    return error.kind() == expected && named;
  }
}

// A call that returned, even by failing, writes no more into its buffer:
// parts of the failed step that arrive late (from ranks still alive) must
// not land in it. There is no event to wait on for something that must not
// happen, so the buffer is watched for 300 ms: a shorter wait could only
// miss a late write (passing when it should fail), never fail a sound run.
bool untouched_after_return(const std::vector<float>& buffer) {
  const std::vector<float> returned = buffer;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (buffer == returned) return true;
  std::printf("FAILED: the failed call's buffer changed after it returned\n");
  return false;
}

// After a failure, a later call of another kind fails at once with it, and
// names itself: the user sees which of their calls met the failure.
bool a_later_call_fails_naming_itself(rlx::Transport& group) {
  if (group.backend() == "mpi") return true;  // Open MPI ends the job on a lost peer
  const auto start = Clock::now();
  try {
    group.barrier();
  } catch (const rlx::CollectiveError& error) {
    const bool named =
        std::string_view(error.what()).find("barrier, collective #") != std::string_view::npos;
    if (error.kind() == rlx::ErrorKind::peer_lost && named && ms_since(start) < 1000) return true;
    std::printf("FAILED: the barrier after the failure failed in %lld ms with: %s\n",
                ms_since(start), error.what());
    return false;
  }
  std::printf("FAILED: a barrier after the failure succeeded\n");
  return false;
}

// A mismatched all_reduce of `count` elements of T (rank 1 may differ in
// type, op or count): the error must name `fragments`. Over MPI the buffer
// must come back untouched (the calls are compared before any data is
// used); TCP and verbs compare step by step, so a step that matched may
// already have changed it (docs/RELIABILITY.md).
template <class T>
bool expect_untouched_mismatch(rlx::Transport& group, std::size_t count, rlx::ReduceOp op,
                               std::initializer_list<std::string_view> fragments) {
  std::vector<T> data(count, T(group.rank() + 1));
  const std::vector<T> before = data;
  const bool ok = expect_error(
      rlx::ErrorKind::mismatch, [&] { group.all_reduce(std::span(data), op); }, fragments);
  const bool untouched = group.backend() != "mpi" || data == before;
  if (!untouched) std::printf("FAILED: the mismatched all_reduce changed the buffer\n");
  return ok && untouched;
}

// Stops this process as SIGSTOP would from outside (a debugger, a frozen VM);
// a helper process kills it after `seconds`, so no test waits on it forever.
void freeze(unsigned seconds) {
  // A test that knows when every survivor has reported sets it shorter.
  if (const char* set = std::getenv("RLX_FREEZE_SECONDS"))
    seconds = static_cast<unsigned>(std::atoi(set));
  const pid_t frozen = ::getpid();
  if (::fork() == 0) {
    ::sleep(seconds);
    ::kill(frozen, SIGKILL);
    ::_exit(0);
  }
  ::raise(SIGSTOP);
}

// On the last rank: SIGKILL RLX_KILL_AFTER_MS (default 150) from now.
void kill_last_rank_later(const rlx::Transport& group) {
  if (group.rank() != group.world_size() - 1) return;
  const char* after = std::getenv("RLX_KILL_AFTER_MS");
  std::thread([ms = after ? std::atoi(after) : 150] {
    // A stimulus, not a wait for an event: it only picks where the kill
    // lands; the tests kill at several points so that some land mid-call,
    // and every landing point must give peer_lost.
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    ::raise(SIGKILL);
  }).detach();
}

// The cap on early messages is for messages nobody waits for: the first 8 MiB
// message (8x the cap) reaches its waiting receiver whole; the second, which
// rank 1 never receives (it waits on another tag), fails both ranks with
// resource_exhausted naming the cap.
bool message_over_cap(rlx::Transport& group) {
  constexpr std::size_t kBig = std::size_t{8} << 20;
  std::vector<std::byte> message(kBig);
  for (std::size_t i = 0; i < kBig; ++i) message[i] = static_cast<std::byte>(i * 131 % 251);
  group.barrier();
  if (group.rank() == 0) {
    // The stimulus is a receiver that already waits: rank 1 enters recv_bytes
    // right after the barrier, and a second is ample margin. Were it late,
    // the message would fail the job loudly, not pass.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    group.send_bytes(1, 5, message);
    // Over verbs the second send may still be waiting for credits when rank
    // 1's abort arrives: the failure may end either call.
    return expect_error(rlx::ErrorKind::resource_exhausted,
                        [&] {
                          group.send_bytes(1, 6, message);
                          group.barrier();
                        },
                        {"RLX_UNEXPECTED_BYTES"});
  }
  const auto got = group.recv_bytes(0, 5);
  if (got != message) {
    std::printf("FAILED: the awaited %zu-byte message arrived as %zu bytes\n", kBig, got.size());
    return false;
  }
  // Waiting on tag 7 leaves tag 6 unawaited; its arrival fails the transport.
  return expect_error(rlx::ErrorKind::resource_exhausted, [&] { group.recv_bytes(0, 7); },
                      {"RLX_UNEXPECTED_BYTES", "no recv_bytes waited for"});
}

bool mismatch_by_one(rlx::Transport& group, std::size_t count) {
  const std::size_t mine = group.rank() == 1 ? count + 1 : count;
  const std::string theirs = std::to_string(count) + " x f32";
  const std::string longer = std::to_string(count + 1) + " x f32";
  return expect_untouched_mismatch<float>(group, mine, rlx::ReduceOp::sum, {theirs, longer});
}

// This process's peak resident memory, from /proc/self/status (VmHWM).
long peak_rss_kib() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) kib = std::atol(line + 6);
  }
  std::fclose(status);
  return kib;
}

// A test that attacks the job for as long as it takes asks it to stop by
// creating RLX_STEADY_STOP_FILE.
bool stop_requested() {
  const char* stop = std::getenv("RLX_STEADY_STOP_FILE");
  return stop != nullptr && ::access(stop, F_OK) == 0;
}

bool steady(rlx::Transport& group) {
  // Rank 0's peers are all connected once init returned: tell a test that
  // waits to attack the running job, not its setup.
  if (const char* ready = std::getenv("RLX_STEADY_READY_FILE"); ready && group.rank() == 0) {
    if (std::FILE* file = std::fopen(ready, "w")) std::fclose(file);
  }
  const auto start = Clock::now();
  const char* length = std::getenv("RLX_STEADY_MS");
  const long run_ms = length != nullptr ? std::atol(length) : 2000;
  for (int round = 0;; ++round) {
    std::vector<std::int64_t> v(4096 + static_cast<std::size_t>(round % 7), group.rank() + 1);
    group.all_sum(std::span(v));
    const std::int64_t want =
        static_cast<std::int64_t>(group.world_size()) * (group.world_size() + 1) / 2;
    for (auto x : v) {
      if (x != want) return false;
    }
    // Rank 0 decides when to stop, and everyone learns it in the same round.
    std::int32_t keep_going = group.rank() == 0 && ms_since(start) < run_ms && !stop_requested();
    group.all_sum(std::span(&keep_going, 1));
    if (keep_going == 0) {
      std::printf("RESULT kind=none rounds=%d peak_rss_kib=%ld\n", round + 1, peak_rss_kib());
      return true;
    }
  }
}

// The sizes send_then_close sends, smallest to one four times the
// shared-memory ring (which the receiver's drain thread then holds).
constexpr std::size_t kSendThenCloseSizes[] = {4, 4096, 200 << 10, 1 << 20};

std::vector<std::byte> numbered_message(std::size_t bytes, std::size_t seed) {
  std::vector<std::byte> message(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    message[i] = static_cast<std::byte>((i + seed) * 131 % 251);
  return message;
}

// Every message a rank sent before it closed is delivered: rank 1's sends
// return and it closes its group at once; rank 0 waits until it hears the
// close, then receives every message whole.
bool send_then_close(rlx::Transport& group) {
  if (group.rank() == 1) {
    for (std::size_t i = 0; i < std::size(kSendThenCloseSizes); ++i) {
      group.send_bytes(0, static_cast<rlx::Tag>(i % 2),
                       numbered_message(kSendThenCloseSizes[i], i));
    }
    std::printf("RESULT kind=none ms=0\n");
    return true;  // main returns: the group closes
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 1 has closed by now
  for (std::size_t i = 0; i < std::size(kSendThenCloseSizes); ++i) {
    const auto got = group.recv_bytes(1, static_cast<rlx::Tag>(i % 2));
    if (got != numbered_message(kSendThenCloseSizes[i], i)) {
      std::printf("FAILED: message %zu arrived as %zu bytes, not the %zu sent\n", i, got.size(),
                  kSendThenCloseSizes[i]);
      return false;
    }
  }
  // Nothing more comes: the next receive says so at once, naming rank 1.
  return expect_error(rlx::ErrorKind::peer_lost, [&] { group.recv_bytes(1, 0); },
                      {"rank 1 has shut down its transport"});
}

// Whether `message` is numbered_message(size(), seed), without a second copy.
bool is_numbered(std::span<const std::byte> message, std::size_t seed) {
  for (std::size_t i = 0; i < message.size(); ++i) {
    if (message[i] != static_cast<std::byte>((i + seed) * 131 % 251)) return false;
  }
  return true;
}

// A message far larger than the sockets' buffers, sent by a rank that
// returns from main the moment its send returns: the receiver is already
// reading it into its own buffer (TCP's direct receive) when the close
// comes, and gets every byte, then the messages behind it.
bool large_send_then_close(rlx::Transport& group) {
  constexpr std::size_t kLarge = 64 << 20;
  if (group.rank() == 1) {
    const auto large = numbered_message(kLarge, 7);
    group.barrier();
    // Rank 0 entered its receive right after the barrier; 200 ms is ample
    // margin. Were it late, the message would go through the mailbox, which
    // passes too but tests less.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    group.send_bytes(0, 0, large);
    for (rlx::Tag tag = 1; tag <= 3; ++tag) group.send_bytes(0, tag, numbered_message(4096, tag));
    std::printf("RESULT kind=none ms=0\n");
    return true;  // main returns: the group closes
  }
  std::vector<std::byte> large(kLarge);
  group.barrier();
  group.recv_bytes_into(1, 0, large);
  if (!is_numbered(large, 7)) {
    std::printf("FAILED: the %zu-byte message arrived changed\n", kLarge);
    return false;
  }
  for (rlx::Tag tag = 1; tag <= 3; ++tag) {
    if (!is_numbered(group.recv_bytes(1, tag), tag)) {
      std::printf("FAILED: message of tag %d arrived changed\n", static_cast<int>(tag));
      return false;
    }
  }
  // The close comes after them: the next receive says so, naming rank 1.
  return expect_error(rlx::ErrorKind::peer_lost, [&] { group.recv_bytes(1, 0); },
                      {"rank 1 has shut down its transport"});
}

// Two micro-batches' forward and all-reduce as one compiled graph, each
// all-reduce its own call (the bucket cap is one output), so the first
// runs on the plan's background thread while the second computes.
bool compiled_peer_killed(rlx::Transport& group) {
  rlx::Graph graph;
  const rlx::Node w = graph.constant(rlx::full({256, 256}, 0.001));
  std::vector<rlx::Node> outputs;
  for (int k = 0; k < 2; ++k) {
    const rlx::Node x = graph.input("x" + std::to_string(k), {64, 256});
    outputs.push_back(graph.custom_op("collective.all_reduce",
                                      rlx::distributed::collective_attrs(rlx::ReduceOp::sum, 0),
                                      {graph.gelu(graph.matmul(x, w))}));
  }
  graph.set_outputs(outputs);
  rlx::set_batch_bytes_cap(64 * 256 * sizeof(float));
  rlx::CompiledGraph compiled = rlx::compile(graph);
  const std::vector<float> x(64 * 256, 1.0f);
  const rlx::Value inputs[] = {x, x};
  return expect_error(rlx::ErrorKind::peer_lost, [&] {
    for (int i = 0;; ++i) {
      if (group.rank() == group.world_size() - 1 && i == 5) ::raise(SIGKILL);
      compiled.run_slots(inputs);
    }
  });
}

bool irecv_peer_killed(rlx::Transport& group) {
  const int last = group.world_size() - 1;
  constexpr rlx::Tag kTags = 4, kArrived = 99;
  constexpr std::size_t kBytes = 3000;
  if (group.rank() == last) {
    for (int peer = 0; peer < last; ++peer) {
      for (rlx::Tag tag = 0; tag + 1 < kTags; ++tag) {
        group.send_bytes(peer, tag, numbered_message(kBytes, tag));
      }
    }
    for (int peer = 0; peer < last; ++peer) group.recv_bytes(peer, kArrived);
    ::raise(SIGKILL);
  }
  std::vector<std::vector<std::byte>> inboxes(kTags, std::vector<std::byte>(kBytes));
  std::vector<rlx::Request> requests;
  for (rlx::Tag tag = 0; tag < kTags; ++tag) {
    requests.push_back(group.irecv(last, tag, std::span(inboxes[tag])));
  }
  for (rlx::Tag tag = 0; tag + 1 < kTags; ++tag) {
    requests[tag].wait();
    if (inboxes[tag] != numbered_message(kBytes, tag)) {
      std::printf("FAILED: the message of tag %u arrived wrong\n", tag);
      return false;
    }
  }
  group.send_bytes(last, kArrived, {});
  return expect_error(rlx::ErrorKind::peer_lost, [&] { requests[kTags - 1].wait(); },
                      {"rank " + std::to_string(last)});
}

// The last rank leaves cleanly mid-loop; the others learn it at once.
bool clean_exit(rlx::Transport& group) {
  const int last = group.world_size() - 1;
  std::vector<float> data(1 << 16, 1.0f);
  if (group.rank() == last) {
    for (int i = 0; i < 5; ++i) group.all_sum(std::span(data));
    std::printf("RESULT kind=none ms=0\n");
    return true;
  }
  const bool reported = expect_error(rlx::ErrorKind::peer_lost,
                                     [&] {
                                       for (;;) group.all_sum(std::span(data));
                                     },
                                     {"rank " + std::to_string(last)});
  return a_later_call_fails_naming_itself(group) && reported;
}

// Small rooted calls where a rank waits for no one (a gather's non-roots, a
// broadcast's root) run ahead and check the others' call lines later; here
// the ranks that ran ahead then block in a receive, while the late rank's
// calls need their counts (shm_call_lines.cc): every value arrives, nothing
// waits out the deadline.
bool rooted_run_ahead(rlx::Transport& group) {
  const int rank = group.rank(), n = group.world_size(), last = n - 1;
  // More calls than each tier of a rank's slots holds (node.h): its call
  // lines and small payload slots (1 float), its mid payload slots (512
  // floats: 2 KiB), its large ones (2048 floats: 8 KiB).
  constexpr int kTiny = 70, kMid = 20, kLarge = 6;
  const auto count_of_call = [](int call) -> std::size_t {
    return call < kTiny ? 1 : call < kTiny + kMid ? 512 : 2048;
  };
  bool ok = true;
  // So that the others run ahead of rank 0 through their gathers, and rank 0
  // ahead of the last rank through its broadcasts.
  const auto late = [](int sleeper, int me) {
    if (sleeper == me) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  };
  late(0, rank);
  for (int call = 0; call < kTiny + kMid + kLarge; ++call) {
    const std::size_t count = count_of_call(call);
    std::vector<float> mine(count, static_cast<float>(rank * 1000 + call));
    std::vector<float> all(count * static_cast<std::size_t>(n), -1.0f);
    group.gather(std::span<const float>(mine), std::span(all), 0);
    for (std::size_t i = 0; rank == 0 && i < all.size(); ++i) {
      ok &= all[i] == static_cast<float>(static_cast<int>(i / count) * 1000 + call);
    }
  }
  std::int32_t token = 7;
  if (rank == 0) {
    for (int peer = 1; peer < n; ++peer) group.send(peer, 1, std::span(&token, 1));
  } else {
    token = 0;
    group.recv(0, 1, std::span(&token, 1));
    ok &= token == 7;
  }
  late(last, rank);
  for (int call = 0; call < kTiny + kMid + kLarge; ++call) {
    std::vector<float> data(count_of_call(call), rank == 0 ? static_cast<float>(call) : -1.0f);
    group.broadcast(std::span(data), 0);
    for (const float value : data) ok &= value == static_cast<float>(call);
  }
  if (rank == last) group.send(0, 2, std::span(&token, 1));
  if (rank == 0) group.recv(last, 2, std::span(&token, 1));
  group.barrier();
  if (!ok) std::printf("FAILED: a rooted call that ran ahead delivered a wrong value\n");
  return ok;
}

// One call of a loop of small rooted calls whose roots move: a gather (its
// non-roots return without waiting) and a broadcast (its root does), of
// 1 float (in the call line) or 512 (a larger payload slot). True when
// every value that arrived is right.
bool rooted_call_right(rlx::Transport& group, int call) {
  const int rank = group.rank(), n = group.world_size(), root = call % n;
  const std::size_t count = call % 3 == 0 ? 512 : 1;
  std::vector<float> mine(count, static_cast<float>(rank * 1000 + call));
  std::vector<float> all(count * static_cast<std::size_t>(n), -1.0f);
  group.gather(std::span<const float>(mine), std::span(all), root);
  bool ok = true;
  for (std::size_t i = 0; rank == root && i < all.size(); ++i) {
    ok &= all[i] == static_cast<float>(static_cast<int>(i / count) * 1000 + call);
  }
  std::vector<float> data(count, rank == root ? static_cast<float>(call) : -1.0f);
  group.broadcast(std::span(data), root);
  for (const float value : data) ok &= value == static_cast<float>(call);
  if (!ok) std::printf("FAILED: rooted call %d delivered a wrong value\n", call);
  return ok;
}

// The last rank killed RLX_KILL_AFTER_MS into a loop of small rooted calls,
// where ranks run ahead of each other: peer_lost naming it on every survivor,
// wherever it was (a root or not, waited for or run ahead of).
bool run_ahead_killed(rlx::Transport& group) {
  kill_last_rank_later(group);
  bool right = true;
  const bool failed = expect_error(rlx::ErrorKind::peer_lost, [&] {
    for (int call = 0;; ++call) right = rooted_call_right(group, call) && right;
  });
  return failed && right;
}

// The last rank stops (SIGSTOP) after RLX_FREEZE_AT calls (default 100) of
// the same loop: every survivor times out at the deadline naming it, whether
// it waited for its line, for its count of calls read, or for a rank that
// waits for it.
bool run_ahead_frozen(rlx::Transport& group) {
  const int last = group.world_size() - 1;
  const char* at = std::getenv("RLX_FREEZE_AT");
  const int freeze_at = at ? std::atoi(at) : 100;
  bool right = true;
  const bool failed = expect_error(rlx::ErrorKind::timeout,
                                   [&] {
                                     for (int call = 0;; ++call) {
                                       if (group.rank() == last && call == freeze_at) freeze(10);
                                       right = rooted_call_right(group, call) && right;
                                     }
                                   },
                                   {"rank " + std::to_string(last) + " does not answer at all"});
  return failed && right;
}

// Rank 0 gathers to rank 1 while rank 1 broadcasts from itself: both calls
// return without waiting (small), and both ranks then wait in receives
// nobody sends. The receives time out, and the close logs the mismatch that
// caused it. With RLX_THEN_KILL=1 rank 1 is killed next, and rank 0 learns
// of it in a receive: its close, after that failure, logs the mismatch too.
bool run_ahead_mismatch_then_receive(rlx::Transport& group) {
  std::vector<float> one(1, 1.0f), two(2, 0.0f);
  if (group.rank() == 0) {
    group.gather(std::span<const float>(one), std::span(two), 1);
  } else {
    group.broadcast(std::span(one), 1);
  }
  bool ok = expect_error(rlx::ErrorKind::timeout, [&] { group.recv_bytes(1 - group.rank(), 9); });
  // Both deadlines expire within milliseconds of each other: the close of
  // the first rank, which finds the mismatch and tells the other, must not
  // reach the other before its own receive has timed out (it would fail
  // with the mismatch instead, as it should, but that is not this case).
  std::this_thread::sleep_for(group.timeout() / 2);
  const char* then_kill = std::getenv("RLX_THEN_KILL");
  if (then_kill == nullptr || std::string(then_kill) != "1") return ok;
  if (group.rank() == 1) ::raise(SIGKILL);
  return expect_error(rlx::ErrorKind::peer_lost, [&] { group.recv_bytes(1, 10); }) && ok;
}

// This rank's rooted call from RLX_ROOTED_VIEWS ("broadcast:2,reduce:0,..."
// one kind and root per rank), then a barrier: mixes where no rank names
// itself the root, or kinds whose trees run different ways, must fail every
// rank with mismatch at once, not wait for the deadline.
bool mismatch_views(rlx::Transport& group, std::span<float> data) {
  const char* views = std::getenv("RLX_ROOTED_VIEWS");
  std::string view;
  std::string_view rest = views ? views : "";
  for (int r = 0; r <= group.rank(); ++r) {
    const auto comma = rest.find(',');
    view = std::string(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  const auto colon = view.find(':');
  if (colon == std::string::npos) {
    std::printf("FAILED: no view for rank %d in RLX_ROOTED_VIEWS\n", group.rank());
    return false;
  }
  const std::string kind = view.substr(0, colon);
  const int root = std::atoi(view.c_str() + colon + 1);
  const std::size_t n = static_cast<std::size_t>(group.world_size());
  std::vector<float> all(data.size() * n, 1.0f);
  return expect_error(rlx::ErrorKind::mismatch, [&] {
    if (kind == "broadcast") group.broadcast(data, root);
    if (kind == "reduce") group.reduce(data, rlx::ReduceOp::sum, root);
    if (kind == "gather") group.gather(std::span<const float>(data), std::span(all), root);
    if (kind == "scatter") group.scatter(std::span<const float>(all), data, root);
    group.barrier();
  });
}

// A call that returned has done its work: the last rank's all_sum returned,
// so its part reached the others, whose all_sum must complete even though it
// exits at once after (its sockets close, its progress thread ends).
bool exit_after_collective(rlx::Transport& group) {
  const int last = group.world_size() - 1;
  // 4 MiB: the survivors still read and reduce the last of it when the last
  // rank exits, while their progress thread sees its connection end.
  std::vector<float> data(1 << 20, 1.0f);
  group.barrier();
  group.all_sum(std::span(data));
  if (group.rank() == last) std::_Exit(0);
  const auto want = static_cast<float>(group.world_size());
  if (!std::all_of(data.begin(), data.end(), [want](float v) { return v == want; })) {
    std::printf("RESULT kind=wrong_sum ms=0\n");
    return false;
  }
  const bool reported = expect_error(rlx::ErrorKind::peer_lost,
                                     [&] {
                                       for (;;) group.all_sum(std::span(data));
                                     },
                                     {"rank " + std::to_string(last)});
  return a_later_call_fails_naming_itself(group) && reported;
}

// Where this rank's own segment starts in its address space: found in
// /proc/self/maps by its name "rlx-...-<rank>-<pid namespace>-<pid>"; 0 when
// it is not mapped.
std::uintptr_t own_segment(int rank) {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return 0;
  const std::string own = "-" + std::to_string(rank) + "-";  // the rank field, between dashes
  char line[1024];
  std::uintptr_t start = 0;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    const char* name = std::strstr(line, "/dev/shm/rlx-");
    if (name == nullptr) continue;
    std::string text(name);
    text = text.substr(0, text.find(' '));
    const auto pid_at = text.rfind('-'), ns_at = text.rfind('-', pid_at - 1);
    const auto rank_at = text.rfind('-', ns_at - 1);
    if (text.substr(rank_at, ns_at - rank_at + 1) == own &&
        std::stol(text.substr(pid_at + 1)) == ::getpid()) {
      start = std::strtoull(line, nullptr, 16);
      break;
    }
  }
  std::fclose(maps);
  return start;
}

// The counter at `offset` of the ring from rank 1 to rank 0, in rank 0's
// segment as this rank (rank 0) maps it.
std::atomic<std::uint64_t>* ring_counter_of_rank_0(std::size_t offset) {
  const std::uintptr_t start = own_segment(0);
  if (start == 0) return nullptr;
  const rlx::shm::NodeShape shape{.local_size = 2};
  return reinterpret_cast<std::atomic<std::uint64_t>*>(
      start + rlx::shm::SharedSegment::kHeaderBytes + shape.ring_offset(1) + offset);
}

// Shared memory is trusted to hold nothing: a counter moved by another hand
// is a protocol_violation on the side that reads it, passed on to the other,
// never a copy past the ring.
bool corrupt_ring(rlx::Transport& group, std::size_t offset) {
  if (group.path_to(1 - group.rank()) != "shared memory") {
    std::printf("RESULT kind=skipped: rank %d reaches its peer by %s\n", group.rank(),
                group.path_to(1 - group.rank()).c_str());
    return true;
  }
  if (group.rank() == 0) {
    auto* counter = ring_counter_of_rank_0(offset);
    if (counter == nullptr) {
      std::printf("FAILED: rank 0's segment is not in /proc/self/maps\n");
      return false;
    }
    counter->fetch_add(std::uint64_t{1} << 40);
  }
  group.barrier();  // over the call lines, not the ring
  const auto corrupt = [&] {
    if (group.rank() == 1) group.send_bytes(0, 3, numbered_message(1 << 20, 0));
    group.recv_bytes(1 - group.rank(), 3);
  };
  return expect_error(rlx::ErrorKind::protocol_violation, corrupt, {"counters are corrupt"});
}

// Rank 1's count of calls read, moved far ahead by another hand while rank 1
// waits in a receive: rank 0, whose small broadcasts ran ahead until they
// need that count, fails with protocol_violation, and rank 1 hears of it.
bool corrupt_calls_read(rlx::Transport& group) {
  if (group.path_to(1 - group.rank()) != "shared memory") {
    std::printf("RESULT kind=skipped: rank %d reaches its peer by %s\n", group.rank(),
                group.path_to(1 - group.rank()).c_str());
    return true;
  }
  group.barrier();
  if (group.rank() == 1) {
    const std::uintptr_t start = own_segment(1);
    if (start == 0) {
      std::printf("FAILED: rank 1's segment is not in /proc/self/maps\n");
      return false;
    }
    auto* control =
        reinterpret_cast<rlx::shm::RankControl*>(start + rlx::shm::SharedSegment::kHeaderBytes);
    control->calls_read.fetch_add(std::uint64_t{1} << 40);
    return expect_error(rlx::ErrorKind::protocol_violation, [&] { group.recv_bytes(0, 4); },
                        {"corrupt shared memory"});
  }
  return expect_error(rlx::ErrorKind::protocol_violation,
                      [&] {
                        std::vector<float> data(1, 1.0f);
                        for (int call = 0; call < 2 * rlx::shm::NodeShape::kCallSlots; ++call) {
                          group.broadcast(std::span(data), 0);
                        }
                      },
                      {"published that it read", "corrupt shared memory"});
}

// Rank 1's call lines, rewritten by another hand after rank 0's small
// broadcast returned without reading them: rank 0's next call checks the
// line it left unchecked, finds no call in it and fails with
// protocol_violation, and rank 1 hears of it. (Lines are compared as bytes
// before they are decoded: a differing line must still be decoded.)
bool corrupt_call_line(rlx::Transport& group) {
  if (group.path_to(1 - group.rank()) != "shared memory") {
    std::printf("RESULT kind=skipped: rank %d reaches its peer by %s\n", group.rank(),
                group.path_to(1 - group.rank()).c_str());
    return true;
  }
  group.barrier();
  std::vector<float> data(1, 1.0f);
  group.broadcast(std::span(data), 0);  // rank 0 returns without reading rank 1's line
  if (group.rank() == 1) {
    const std::uintptr_t start = own_segment(1);
    if (start == 0) {
      std::printf("FAILED: rank 1's segment is not in /proc/self/maps\n");
      return false;
    }
    const std::uintptr_t lines =
        start + rlx::shm::SharedSegment::kHeaderBytes + rlx::shm::NodeShape::kControlBytes;
    for (int slot = 0; slot < rlx::shm::NodeShape::kCallSlots; ++slot) {
      auto* line = reinterpret_cast<rlx::shm::CallLine*>(
          lines + static_cast<std::size_t>(slot) * rlx::shm::NodeShape::kCallLineBytes);
      line->call[0] = std::byte{0xee};  // no collective's kind
    }
    group.send_bytes(0, 5, numbered_message(8, 0));
  } else {
    group.recv_bytes(1, 5);
  }
  return expect_error(rlx::ErrorKind::protocol_violation, [&] { group.barrier(); },
                      {"corrupt shared memory"});
}

// This process's process_vm_readv fails with EPERM from now on (every
// thread's, TSYNC), as under a container's seccomp profile.
void refuse_process_vm_readv() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  const sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &program) != 0) {
    std::perror("fault_program: seccomp");
    std::exit(1);
  }
}

// Every rank's block of 4 MiB, numbered by rank and call.
bool all_gather_blocks_right(rlx::Transport& group, int call) {
  const std::size_t block = std::size_t{1} << 20;
  std::vector<float> in(block, static_cast<float>(group.rank() * 1000 + call));
  std::vector<float> out(block * static_cast<std::size_t>(group.world_size()));
  group.all_gather(std::span<const float>(in), std::span(out));
  for (std::size_t i = 0; i < out.size(); i += 4099) {
    if (out[i] != static_cast<float>(static_cast<int>(i / block) * 1000 + call)) return false;
  }
  return true;
}

bool single_copy_killed(rlx::Transport& group) {
  kill_last_rank_later(group);
  bool right = true;
  const bool failed = expect_error(rlx::ErrorKind::peer_lost, [&] {
    for (int call = 0;; ++call) right = all_gather_blocks_right(group, call) && right;
  });
  return failed && right;
}

// Rank 1 refused every read from the start: forcing single copy fails
// every rank's call alike before anything moves, and the default works.
bool single_copy_refused(rlx::Transport& group) {
  const std::size_t n = static_cast<std::size_t>(group.world_size());
  std::vector<float> in(1 << 16, 1.0f), out((1 << 16) * n, 7.0f);
  const bool forced_fails = expect_error(
      rlx::ErrorKind::invalid_argument,
      [&] { group.all_gather(std::span<const float>(in), std::span(out)); },
      {"forces single_copy, which cannot run here: single copy is off on this host: rank",
       "1 cannot read"});
  const bool untouched = std::all_of(out.begin(), out.end(), [](float v) { return v == 7.0f; });
  bool right = true;
  for (int call = 0; call < 3; ++call) right = all_gather_blocks_right(group, call) && right;
  return forced_fails && untouched && right;
}

bool single_copy_refused_later(rlx::Transport& group) {
  if (group.rank() == 1) refuse_process_vm_readv();
  return expect_error(rlx::ErrorKind::backend_unavailable,
                      [&] { all_gather_blocks_right(group, 0); },
                      {"reading rank ", "single copy, process_vm_readv", "the kernel refused"});
}

}  // namespace

// A rank still setting up its transport when the others already failed
// hears of it from init: the failure the mode expects, reported as
// expect_error would.
std::shared_ptr<rlx::Transport> join_or_report(const std::string& mode) {
  const auto start = Clock::now();
  try {
    // RLX_BACKEND picks the transport (tcp unless set): the same cases run over verbs.
    return rlx::init("any", /*strict=*/true);
  } catch (const rlx::CollectiveError& error) {
    std::printf("RESULT kind=%s ms=%lld\nMESSAGE %s\n", std::string(name_of(error.kind())).c_str(),
                ms_since(start), error.what());
    const bool expected = mode.starts_with("mismatch") ? error.kind() == rlx::ErrorKind::mismatch
                          : mode.ends_with("peer_killed")
                              ? error.kind() == rlx::ErrorKind::peer_lost
                              : false;
    std::fflush(stdout);
    std::exit(expected ? 0 : 1);
  }
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const char* launched_rank = std::getenv("RLX_RANK");
  if (mode == "single_copy_refused" && launched_rank && std::string(launched_rank) == "1") {
    refuse_process_vm_readv();
  }
  auto group = join_or_report(mode);
  const int rank = group->rank(), last = group->world_size() - 1;
  const bool fewer = mode == "mismatch_size" || mode == "mismatch_nonblocking";
  std::vector<float> data(rank == 1 && fewer ? 1000 : 2000, 1.0f);
  bool ok = false;
  if (mode == "mismatch_size") {
    ok = expect_error(rlx::ErrorKind::mismatch, [&] { group->all_sum(std::span(data)); });
  } else if (mode == "mismatch_kind") {
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] { rank == 0 ? group->barrier() : group->all_sum(std::span(data)); });
  } else if (mode == "mismatch_dtype") {
    ok = rank == 1 ? expect_untouched_mismatch<std::int32_t>(*group, 2000, rlx::ReduceOp::sum,
                                                             {"2000 x i32", "2000 x f32"})
                   : expect_untouched_mismatch<float>(*group, 2000, rlx::ReduceOp::sum,
                                                      {"2000 x i32", "2000 x f32"});
  } else if (mode == "mismatch_op") {
    ok = expect_untouched_mismatch<float>(*group, 10,
                                          rank == 1 ? rlx::ReduceOp::max : rlx::ReduceOp::sum,
                                          {"all_reduce max", "all_reduce sum"});
  } else if (mode == "mismatch_by_one") {
    // A mismatch ends the group, so only the first size can run in one job.
    const char* count = std::getenv("RLX_MISMATCH_COUNT");
    ok = mismatch_by_one(*group, count != nullptr ? std::strtoul(count, nullptr, 10) : 1000);
  } else if (mode == "mismatch_gather") {
    std::vector<float> gathered(data.size() * static_cast<std::size_t>(group->world_size()));
    // Over shared memory calls are compared before any data moves.
    const bool shared = group->path_to(rank == 0 ? 1 : 0) == "shared memory";
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] {
                        if (rank == 0) {
                          group->all_gather(std::span<const float>(data), std::span(gathered));
                        } else {
                          group->all_sum(std::span(data));
                        }
                      },
                      {"all_gather", "all_reduce sum"});
    if (shared && rank == 0 && gathered != std::vector<float>(gathered.size())) {
      std::printf("FAILED: the mismatched all_gather wrote into its output\n");
      ok = false;
    }
  } else if (mode == "mismatch_root") {
    // A root needs nothing from the others, so over the network it may finish
    // before they find the mismatch: its next call reports it.
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] {
                        group->broadcast(std::span(data), rank == 1 ? 1 : 0);
                        group->barrier();
                      },
                      {"from rank 0", "from rank 1"});
  } else if (mode == "mismatch_split") {
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] { rank == 1 ? (void)group->split(0) : group->all_sum(std::span(data)); },
                      {"all_gather", "all_reduce sum"});
  } else if (mode == "mismatch_gather_root") {
    std::vector<float> all(data.size() * static_cast<std::size_t>(group->world_size()));
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] {
                        group->gather(rlx::ConstElementSpan::of(std::span<const float>(data)),
                                      rlx::ElementSpan::of(std::span(all)), rank == 1 ? 1 : 0);
                        group->barrier();
                      },
                      {"to rank 0", "to rank 1"});
  } else if (mode == "mismatch_reduce_root") {
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] {
                        group->reduce(std::span(data), rlx::ReduceOp::sum, rank == last ? last : 0);
                        group->barrier();
                      },
                      {"to rank 0", "to rank " + std::to_string(last)});
  } else if (mode == "mismatch_broadcast_vs_barrier") {
    // A non-root whose left neighbour agreed may finish its part of the tree
    // before it hears of the mismatch: its next call reports it.
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] {
                        rank == last ? group->barrier() : group->broadcast(std::span(data), 0);
                        group->barrier();
                      },
                      {"broadcast", "barrier"});
  } else if (mode == "mismatch_sum_vs_broadcast") {
    // A small all_sum (recursive doubling) beside a broadcast from rank 0:
    // at 6 ranks some rank waits on a peer that sends it nothing.
    const char* odd = std::getenv("RLX_ODD_RANK");
    const bool summing = rank == (odd != nullptr ? std::atoi(odd) : 0);
    std::vector<float> small(16, 1.0f);
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] {
                        summing ? group->all_sum(std::span(small))
                                : group->broadcast(std::span(small), 0);
                        group->barrier();
                      },
                      // Ranks whose broadcast completed meet it in their barrier.
                      {"all_reduce"});
  } else if (mode == "mismatch_scatter_root") {
    std::vector<float> all(data.size() * static_cast<std::size_t>(group->world_size()), 1.0f);
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] {
                        group->scatter(std::span<const float>(all), std::span(data),
                                       rank == last ? last : 0);
                        group->barrier();
                      },
                      {"from rank 0", "from rank " + std::to_string(last)});
  } else if (mode == "mismatch_views") {
    ok = mismatch_views(*group, std::span(data));
  } else if (mode == "mismatch_gather_v") {
    // The same total, another split of it on rank 1.
    std::vector<std::size_t> counts(static_cast<std::size_t>(group->world_size()), 10);
    if (rank == 1) {
      counts[0] = 11;
      counts[1] = 9;
    }
    std::vector<float> gathered(10 * counts.size());
    std::vector<float> mine(counts[static_cast<std::size_t>(rank)], 1.0f);
    ok = expect_error(rlx::ErrorKind::mismatch, [&] {
      group->all_gather_v(std::span<const float>(mine), std::span(gathered), counts);
      group->barrier();
    });
  } else if (mode == "mismatch_all_to_all_v") {
    // Rank 1 expects one element more from rank 0 than rank 0 sends it.
    std::vector<std::size_t> sends(static_cast<std::size_t>(group->world_size()), 5),
        receives = sends;
    if (rank == 1) receives[0] = 6;
    std::vector<float> in(5 * sends.size(), 1.0f), out(5 * sends.size() + (rank == 1 ? 1 : 0));
    // Only rank 1 sees a frame it did not expect: the others may finish
    // their part, and report the mismatch at their next call.
    ok = expect_error(rlx::ErrorKind::mismatch, [&] {
      group->all_to_all_v(std::span<const float>(in), sends, std::span(out), receives);
      group->barrier();
    });
  } else if (mode == "mismatch_nonblocking") {
    ok = expect_error(rlx::ErrorKind::mismatch, [&] { group->iall_sum(std::span(data)).wait(); },
                      {"1000 x f32", "2000 x f32"});
  } else if (mode == "mismatch_all_to_all") {
    const std::size_t block = rank == 1 ? 101 : 100;
    std::vector<float> blocks(block * static_cast<std::size_t>(group->world_size()), 1.0f);
    ok = expect_error(rlx::ErrorKind::mismatch,
                      [&] { group->all_to_all(std::span<const float>(blocks), std::span(blocks)); },
                      {"all_to_all of blocks of 100 x f32", "all_to_all of blocks of 101 x f32"});
  } else if (mode == "message_over_cap") {
    ok = message_over_cap(*group);
  } else if (mode == "peer_killed") {
    std::vector<float> big(1 << 18, 1.0f);
    ok = expect_error(rlx::ErrorKind::peer_lost, [&] {
      for (int i = 0;; ++i) {
        if (rank == last && i == 5) ::raise(SIGKILL);
        group->all_sum(std::span(big));
      }
    });
    ok = untouched_after_return(big) && ok;
  } else if (mode == "compiled_peer_killed") {
    ok = compiled_peer_killed(*group);
  } else if (mode == "skipped_collective") {
    // Rank 1 skips one all_sum of the loop and reaches the barrier after it
    // while the others still run the loop.
    ok = expect_error(rlx::ErrorKind::mismatch, [&] {
      std::vector<float> small(64, 1.0f);
      for (int i = 0; i < 6; ++i) {
        if (rank != 1 || i != 3) group->all_sum(std::span(small));
      }
      group->barrier();
    });
  } else if (mode == "stuck") {
    // The last rank computes (sleeps) for a minute before its fourth all_sum.
    ok = expect_error(rlx::ErrorKind::timeout, [&] {
      std::vector<float> small(64, 1.0f);
      for (int i = 0;; ++i) {
        if (rank == last && i == 3) std::this_thread::sleep_for(std::chrono::minutes(1));
        group->all_sum(std::span(small));
      }
    });
  } else if (mode == "frozen") {
    const std::string named = "rank " + std::to_string(last) + " does not answer at all";
    ok = expect_error(rlx::ErrorKind::timeout,
                      [&] {
                        std::vector<float> small(64, 1.0f);
                        for (int i = 0;; ++i) {
                          if (rank == last && i == 5) freeze(10);
                          group->all_sum(std::span(small));
                        }
                      },
                      {named});
    std::fflush(stdout);
    return ok ? 3 : 1;
  } else if (mode == "send_to_frozen") {
    // Rank 1 stops before the message; rank 0's send fills the sockets and
    // waits for room until its deadline.
    group->barrier();
    if (rank == 1) freeze(4);  // killed after rank 0's deadline (2 s), not long after
    ok = expect_error(rlx::ErrorKind::timeout,
                      [&] { group->send_bytes(1, 3, std::vector<std::byte>(64 << 20)); },
                      {"send_bytes (tag 3, 64 MiB) with peer rank 1: timeout: rank 1 ",
                       "within 2000 ms", "Check: is rank 1 "});
    std::fflush(stdout);
    return ok ? 3 : 1;
  } else if (mode == "recv_timeout") {
    ok = rank != 0 || expect_error(rlx::ErrorKind::timeout, [&] { group->recv_bytes(1, 77); });
    // A receive that timed out leaves the transport usable. The others enter
    // the barrier half a deadline after rank 0's receive gave up, inside the
    // barrier's own deadline on both sides.
    if (rank != 0) std::this_thread::sleep_for(group->timeout() * 3 / 2);
    group->barrier();
  } else if (mode == "corrupt_ring_read") {
    ok = corrupt_ring(*group, rlx::shm::MessageRing::kReadOffset);
  } else if (mode == "corrupt_ring_written") {
    ok = corrupt_ring(*group, rlx::shm::MessageRing::kWrittenOffset);
  } else if (mode == "send_then_close") {
    ok = send_then_close(*group);
  } else if (mode == "large_send_then_close") {
    ok = large_send_then_close(*group);
  } else if (mode == "irecv_peer_killed") {
    ok = irecv_peer_killed(*group);
  } else if (mode == "exit_after_collective") {
    ok = exit_after_collective(*group);
  } else if (mode == "clean_exit") {
    ok = clean_exit(*group);
  } else if (mode == "rooted_run_ahead") {
    ok = rooted_run_ahead(*group);
  } else if (mode == "run_ahead_killed") {
    ok = run_ahead_killed(*group);
  } else if (mode == "run_ahead_frozen") {
    ok = run_ahead_frozen(*group);
    std::fflush(stdout);
    return ok ? 3 : 1;
  } else if (mode == "run_ahead_mismatch_then_receive") {
    ok = run_ahead_mismatch_then_receive(*group);
  } else if (mode == "corrupt_calls_read") {
    ok = corrupt_calls_read(*group);
  } else if (mode == "corrupt_call_line") {
    ok = corrupt_call_line(*group);
  } else if (mode == "mismatch_sum_vs_gather_v" || mode == "mismatch_sum_vs_all_to_all_v") {
    const auto n = static_cast<std::size_t>(group->world_size());
    std::vector<std::size_t> counts(n, 10);
    std::vector<float> mine(10, 1.0f), all(10 * n), received(10 * n);
    const bool gather = mode == "mismatch_sum_vs_gather_v";
    ok = expect_error(
        rlx::ErrorKind::mismatch,
        [&] {
          if (rank != 1) return group->all_sum(std::span(data));
          if (gather)
            return group->all_gather_v(std::span<const float>(mine), std::span(all), counts);
          group->all_to_all_v(std::span<const float>(all), counts, std::span(received), counts);
        },
        {"all_reduce sum", gather ? "all_gather_v" : "all_to_all_v"});
  } else if (mode == "single_copy_killed") {
    ok = single_copy_killed(*group);
  } else if (mode == "single_copy_refused") {
    ok = single_copy_refused(*group);
  } else if (mode == "single_copy_refused_later") {
    ok = single_copy_refused_later(*group);
  } else if (mode == "steady") {
    ok = steady(*group);
  } else {
    std::fprintf(stderr, "fault_program: unknown mode '%s'\n", mode.c_str());
  }
  std::fflush(stdout);
  return ok ? 0 : 1;
}
