#include "rlx/backends/tcp/lane_links.h"

#include <atomic>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

namespace rlx::tcp {
namespace {

using namespace std::chrono_literals;

// Rank 0's LaneLinks with one lane to rank 1, whose end of the connection
// the test drives itself, so it decides how the bytes are cut.
class OneLane {
 public:
  explicit OneLane(std::chrono::milliseconds timeout) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      throw std::runtime_error("socketpair failed");
    }
    std::vector<std::vector<UniqueFd>> lanes(2);
    lanes[1].emplace_back(fds[0]);
    peer_ = UniqueFd(fds[1]);
    links_ = std::make_unique<LaneLinks>(0, 2, std::move(lanes), timeout, bounded_spin_for(1),
                                         latch_, nullptr);
  }
  LaneLinks& links() { return *links_; }
  int peer_fd() const { return peer_.get(); }
  FailureLatch& latch() { return latch_; }
  void close_peer() { peer_ = UniqueFd(); }

 private:
  FailureLatch latch_;
  UniqueFd peer_;
  std::unique_ptr<LaneLinks> links_;
};

// A frame as rank 1 would send it: the header, then the payload.
std::vector<std::byte> frame_of(const CollectiveCall& call, std::uint32_t step,
                                std::span<const std::byte> payload) {
  const wire::EncodedHeader header =
      wire::encode(wire::collective_header(call, step, payload.size()));
  std::vector<std::byte> out(wire::kFrameHeaderBytes + payload.size());
  std::memcpy(out.data(), header.data(), wire::kFrameHeaderBytes);
  if (!payload.empty())
    std::memcpy(out.data() + wire::kFrameHeaderBytes, payload.data(), payload.size());
  return out;
}

// Whether the peer has read every byte written to `fd` (SIOCOUTQ counts the
// unread ones); false once `stop` is set or after 10 s of the peer not reading.
bool wait_until_read(int fd, const std::atomic<bool>& stop) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    int unread = 0;
    if (::ioctl(fd, SIOCOUTQ, &unread) != 0) return false;
    if (unread == 0) return true;
    if (stop || std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::yield();
  }
}

// Writes `bytes` in pieces of `piece` bytes, each once the receiver has read
// the one before, so every piece arrives on its own and the cuts fall inside
// the header and inside elements. Stops early on `stop` or a peer that quit.
void write_in_pieces(int fd, std::span<const std::byte> bytes, std::size_t piece,
                     const std::atomic<bool>& stop) {
  for (std::size_t at = 0; at < bytes.size();) {
    if (!wait_until_read(fd, stop)) return;
    const std::size_t n = std::min(piece, bytes.size() - at);
    const ssize_t sent = ::send(fd, bytes.data() + at, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent <= 0) return;
    at += static_cast<std::size_t>(sent);
  }
}

std::span<const std::byte> bytes_of_floats(const std::vector<float>& values) {
  return std::as_bytes(std::span(values));
}

CollectiveCall sum_of(std::uint64_t count) {
  return {.kind = CollectiveKind::all_reduce,
          .op = ReduceOp::sum,
          .dtype = Dtype::f32,
          .count = count,
          .sequence = 5};
}

TEST(LaneLinks, AFrameIsReducedWhereverItsPiecesAreCut) {
  for (const std::size_t piece : {1, 7, 39, 41, 4096}) {
    OneLane lane(10s);
    const CollectiveCall call = sum_of(1000);
    std::vector<float> data(1000, 1.0f);
    std::vector<float> theirs(1000);
    for (std::size_t i = 0; i < theirs.size(); ++i) theirs[i] = static_cast<float>(i);
    const auto frame = frame_of(call, 3, bytes_of_floats(theirs));
    std::atomic<bool> stop{false};
    std::thread peer([&] { write_in_pieces(lane.peer_fd(), frame, piece, stop); });
    const StepRecv recv{1, 0, std::as_writable_bytes(std::span(data)), /*reduce=*/true};
    lane.links().exchange(call, 3, {}, {&recv, 1});
    peer.join();
    for (std::size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(data[i], 1.0f + static_cast<float>(i))
          << "element " << i << ", pieces of " << piece;
    }
  }
}

TEST(LaneLinks, AFrameLandsWholeWhenNotReduced) {
  OneLane lane(10s);
  const CollectiveCall call = sum_of(333);
  std::vector<float> into(333, -1.0f), theirs(333);
  for (std::size_t i = 0; i < theirs.size(); ++i) theirs[i] = 0.5f * static_cast<float>(i);
  const auto frame = frame_of(call, 0, bytes_of_floats(theirs));
  std::atomic<bool> stop{false};
  std::thread peer([&] { write_in_pieces(lane.peer_fd(), frame, 13, stop); });
  const StepRecv recv{1, 0, std::as_writable_bytes(std::span(into)), /*reduce=*/false};
  lane.links().exchange(call, 0, {}, {&recv, 1});
  peer.join();
  EXPECT_EQ(into, theirs);
}

TEST(LaneLinks, ASendArrivesAsOneFrameTheReceiverCanCheck) {
  OneLane lane(10s);
  const CollectiveCall call = sum_of(64);
  std::vector<float> mine(64, 2.5f);
  const StepSend send{1, 0, bytes_of_floats(mine)};
  lane.links().exchange(call, 1, {&send, 1}, {});
  std::vector<std::byte> got(wire::kFrameHeaderBytes + 64 * sizeof(float));
  ASSERT_EQ(::recv(lane.peer_fd(), got.data(), got.size(), MSG_WAITALL),
            static_cast<ssize_t>(got.size()));
  const wire::FrameHeader header = wire::decode(std::span(got).first<wire::kFrameHeaderBytes>());
  EXPECT_EQ(wire::call_of(header), call);
  EXPECT_EQ(header.tag, 1u);
  EXPECT_EQ(header.length, 64 * sizeof(float));
  EXPECT_EQ(0, std::memcmp(got.data() + wire::kFrameHeaderBytes, mine.data(), header.length));
}

TEST(LaneLinks, AFrameOfAnotherSizeIsAMismatchNamingBothCalls) {
  OneLane lane(10s);
  std::vector<float> data(100, 1.0f), theirs(99, 1.0f);
  // Header and payload in one write, so they arrive in the same read.
  const auto frame = frame_of(sum_of(99), 0, bytes_of_floats(theirs));
  ASSERT_EQ(::send(lane.peer_fd(), frame.data(), frame.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(frame.size()));
  const StepRecv recv{1, 0, std::as_writable_bytes(std::span(data)), /*reduce=*/true};
  try {
    lane.links().exchange(sum_of(100), 0, {}, {&recv, 1});
    FAIL() << "a frame of 99 elements was accepted for a call of 100";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::mismatch);
    EXPECT_EQ(error.peer(), 1);
    EXPECT_NE(std::string(error.what()).find("100 x f32"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("99 x f32"), std::string::npos) << error.what();
  }
  // Nothing of the refused frame was reduced into the data.
  EXPECT_EQ(data, std::vector<float>(100, 1.0f));
}

TEST(LaneLinks, APeerThatTricklesBytesStillMeetsTheDeadline) {
  OneLane lane(300ms);
  const CollectiveCall call = sum_of(1 << 20);
  std::vector<float> data(1 << 20, 0.0f), theirs(1 << 20, 1.0f);
  const auto frame = frame_of(call, 0, bytes_of_floats(theirs));
  std::atomic<bool> stop{false};
  // One byte at a time, each as soon as the last is read: the step never
  // stalls for long, and the 4 MiB would take many seconds.
  std::thread peer([&] { write_in_pieces(lane.peer_fd(), frame, 1, stop); });
  const StepRecv recv{1, 0, std::as_writable_bytes(std::span(data)), /*reduce=*/true};
  const auto start = std::chrono::steady_clock::now();
  try {
    lane.links().exchange(call, 0, {}, {&recv, 1});
    ADD_FAILURE() << "a step that took longer than its deadline completed";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::timeout);
    EXPECT_NE(std::string(error.what()).find("waiting for rank 1"), std::string::npos)
        << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  stop = true;
  peer.join();
}

// A failure heard elsewhere (the latch) while a step only sends to a peer
// that is gone: the socket polls as ready for good and no send completes,
// so the step throws the latch's failure at once, not at its deadline.
TEST(LaneLinks, ASendToAGonePeerAfterAFailureElsewhereThrowsAtOnce) {
  OneLane lane(10s);
  lane.close_peer();
  lane.latch().trip(std::make_exception_ptr(
      CollectiveError(ErrorKind::peer_lost, {.rank = 0, .world_size = 2, .peer = 1}, "heard")));
  // Larger than the socket's buffer, so the send cannot complete before
  // the first write finds the peer gone.
  const std::vector<float> data(1 << 20, 1.0f);
  const StepSend send{1, 0, bytes_of_floats(data)};
  const auto start = std::chrono::steady_clock::now();
  try {
    lane.links().exchange(sum_of(data.size()), 0, {&send, 1}, {});
    ADD_FAILURE() << "a send to a closed peer completed";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::peer_lost) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

// Rank 0's LaneLinks with one lane to each of ranks 1 and 2, whose ends the
// test writes and closes itself.
class TwoPeers {
 public:
  explicit TwoPeers(std::chrono::milliseconds timeout) {
    std::vector<std::vector<UniqueFd>> lanes(3);
    for (int peer = 1; peer <= 2; ++peer) {
      int fds[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
        throw std::runtime_error("socketpair failed");
      }
      lanes[static_cast<std::size_t>(peer)].emplace_back(fds[0]);
      peers_[peer - 1] = UniqueFd(fds[1]);
    }
    links_ = std::make_unique<LaneLinks>(0, 3, std::move(lanes), timeout, bounded_spin_for(1),
                                         latch_, nullptr);
  }
  LaneLinks& links() { return *links_; }
  void write(int peer, std::span<const std::byte> bytes) {
    ASSERT_EQ(::send(peers_[peer - 1].get(), bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  void close(int peer) { peers_[peer - 1] = UniqueFd(); }

 private:
  FailureLatch latch_;
  UniqueFd peers_[2];
  std::unique_ptr<LaneLinks> links_;
};

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// A step waiting on rank 1 sees that rank 2 sent a frame of this call's
// number but another call: a mismatch long before the deadline, although
// rank 1 never answers.
TEST(LaneLinks, AnUnreadFrameOfAnotherCallFromAPeerOutsideTheStepIsAMismatch) {
  TwoPeers links(10s);
  CollectiveCall broadcast = sum_of(16);
  broadcast.kind = CollectiveKind::broadcast;
  broadcast.root = 0;
  links.write(2, frame_of(broadcast, 0, {}));
  std::vector<float> data(16, 1.0f);
  const StepRecv recv{1, 0, std::as_writable_bytes(std::span(data)), /*reduce=*/true};
  const auto start = std::chrono::steady_clock::now();
  try {
    links.links().exchange(sum_of(16), 0, {}, {&recv, 1});
    ADD_FAILURE() << "a step completed without its peer's data";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::mismatch) << error.what();
    EXPECT_NE(std::string(error.what()).find("but rank 2 called broadcast"), std::string::npos)
        << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

// What is not a mismatch: a frame of this call for a later step, a peer
// ahead in a later call, a peer that closed, bytes that are no frame. The
// step waits for rank 1 in poll() past the point where it watches rank 2
// (no spinning on the ready socket it has looked at) and completes, and
// rank 2's bytes stay for the step that reads them.
TEST(LaneLinks, UnreadFramesOfThisCallOrALaterOneOrAClosePassQuietly) {
  CollectiveCall later = sum_of(16);
  later.sequence += 1;
  later.kind = CollectiveKind::barrier;
  const std::vector<std::byte> garbage(wire::kFrameHeaderBytes, std::byte{0xff});
  for (const int what : {0, 1, 2, 3}) {
    TwoPeers links(10s);
    if (what == 0) links.write(2, frame_of(sum_of(16), 1, {}));
    if (what == 1) links.write(2, frame_of(later, 0, {}));
    if (what == 2) links.close(2);
    if (what == 3) links.write(2, garbage);
    std::vector<float> data(16, 1.0f), theirs(16, 2.0f);
    std::atomic<bool> stepping{false};
    std::thread peer([&] {
      while (!stepping) std::this_thread::yield();
      // Not a wait for anything: rank 1's silence, which must outlast the
      // step's 100 ms before it watches rank 2. Asserted below.
      std::this_thread::sleep_for(500ms);
      links.write(1, frame_of(sum_of(16), 0, bytes_of_floats(theirs)));
    });
    const StepRecv recv{1, 0, std::as_writable_bytes(std::span(data)), /*reduce=*/true};
    const double cpu_before = thread_cpu_seconds();
    stepping = true;
    const auto start = std::chrono::steady_clock::now();
    EXPECT_NO_THROW(links.links().exchange(sum_of(16), 0, {}, {&recv, 1})) << "case " << what;
    const auto waited = std::chrono::steady_clock::now() - start;
    const double cpu = thread_cpu_seconds() - cpu_before;
    peer.join();
    EXPECT_EQ(data, std::vector<float>(16, 3.0f)) << "case " << what;
    EXPECT_GE(waited, 400ms) << "case " << what << ": the step never watched rank 2";
    EXPECT_LT(cpu, 0.2) << "case " << what << ": the wait spun";
    const StepRecv nothing{2, 0, {}, /*reduce=*/false};
    if (what == 0) {
      EXPECT_NO_THROW(links.links().exchange(sum_of(16), 1, {}, {&nothing, 1}));
    } else if (what == 1) {
      EXPECT_NO_THROW(links.links().exchange(later, 0, {}, {&nothing, 1}));
    } else if (what == 3) {
      try {
        links.links().exchange(later, 0, {}, {&nothing, 1});
        ADD_FAILURE() << "bytes that are no frame were taken for one";
      } catch (const CollectiveError& error) {
        EXPECT_EQ(error.kind(), ErrorKind::protocol_violation) << error.what();
      }
    }
  }
}

}  // namespace
}  // namespace rlx::tcp
