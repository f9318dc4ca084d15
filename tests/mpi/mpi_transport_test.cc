// The Open MPI transport under mpirun -np N. Every rank runs every case in the
// same order and checks its own results against a reference it computes
// itself; the program exits non-zero on every rank when any rank failed.
#include "rlx/backends/mpi/mpi_transport.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <mpi.h>

#include "rlx/backends/mpi/call_agreement.h"
#include "rlx/backends/mpi/watchdog.h"
#include "rlx/rlx.h"
#include "tests/support/collective_checks.h"
#include "tests/support/reduce_reference.h"

namespace rlx {
namespace {

std::shared_ptr<Transport> the_group;

Transport& group() { return *the_group; }
int n() { return group().world_size(); }
int me() { return group().rank(); }
int right() { return (me() + 1) % n(); }
int left() { return (me() + n() - 1) % n(); }

// A second transport whose messages and collectives are split at 256 bytes,
// to exercise the paths that otherwise need gigabytes. Created (a collective
// call) by the first case that uses it, on every rank.
constexpr std::size_t kSmallMessage = 256;
Transport& small_messages() {
  static const auto instance = std::make_unique<mpi::MpiTransport>(
      launch_env::from_process_environment(), mpi::MpiOptions{.max_message_bytes = kSmallMessage});
  return *instance;
}

std::int64_t value_of(int rank, std::size_t i) { return testing::contribution(rank, i); }

// Integers and bool bit-exact; 16-bit floats within their rounding.
template <class T>
bool close_enough(T got, T want) {
  if constexpr (std::is_same_v<T, float16_t> || std::is_same_v<T, bfloat16_t>) {
    const float g = static_cast<float>(got);
    const float w = static_cast<float>(want);
    return std::fabs(g - w) <= 1e-2f * std::max(1.0f, std::fabs(w));
  } else {
    return got == want;
  }
}

// Reduces count elements of rank-dependent values over `transport` and
// returns how many differ from the reference.
template <class T>
std::size_t wrong_after_all_reduce(Transport& transport, std::size_t count, ReduceOp op,
                                   std::int64_t (*value)(int, std::size_t)) {
  std::unique_ptr<T[]> data(new T[count + 1]);
  for (std::size_t i = 0; i < count; ++i) data[i] = testing::small_integer_as<T>(value(me(), i));
  transport.all_reduce(ElementSpan{data.get(), count, dtype_of<T>}, op);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    T want = testing::small_integer_as<T>(value(0, i));
    for (int r = 1; r < n(); ++r)
      want = testing::reference_combine(want, testing::small_integer_as<T>(value(r, i)), op);
    if (!close_enough(data[i], want)) ++wrong;
  }
  return wrong;
}

TEST(Init, PicksMpiUnderMpirun) {
  EXPECT_TRUE(is_mpi_built());
  EXPECT_EQ(group().backend(), "mpi");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  ASSERT_NE(size, nullptr);
  ASSERT_NE(rank, nullptr);
  EXPECT_EQ(n(), std::atoi(size));
  EXPECT_EQ(me(), std::atoi(rank));
  EXPECT_EQ(init("mpi").get(), &group());  // the same group, asked by name
  int thread_level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&thread_level);
  EXPECT_EQ(thread_level, MPI_THREAD_MULTIPLE);
}

class AllReduce : public ::testing::TestWithParam<std::tuple<Dtype, ReduceOp>> {};

TEST_P(AllReduce, InPiecesWhenLongerThanOneMessage) {
  const auto [dtype, op] = GetParam();
  dispatch_dtype(dtype, [&, op = op](auto tag) {
    using T = decltype(tag);
    for (std::size_t count : {kSmallMessage / sizeof(T), std::size_t{1001}}) {
      EXPECT_EQ(wrong_after_all_reduce<T>(small_messages(), count, op, value_of), 0u)
          << "count " << count;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(EveryDtypeAndOp, AllReduce, testing::every_dtype_and_op(),
                         testing::dtype_and_op_name);

class AllGather : public ::testing::TestWithParam<Dtype> {};

TEST_P(AllGather, InPiecesWhenLongerThanOneMessage) {
  dispatch_dtype(GetParam(), [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t count : {kSmallMessage / sizeof(T) + 1, std::size_t{1001}}) {
      EXPECT_EQ(testing::wrong_after_all_gather<T>(small_messages(), count, false), 0u) << count;
      EXPECT_EQ(testing::wrong_after_all_gather<T>(small_messages(), count, true), 0u) << count;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, AllGather, ::testing::ValuesIn(kAllDtypes),
                         [](const auto& test) { return std::string(name_of(test.param)); });

TEST(Broadcast, InPiecesWhenLongerThanOneMessage) {
  for (std::size_t count : {std::size_t{64}, std::size_t{65}, std::size_t{1001}}) {
    for (int root = 0; root < n(); ++root) {
      std::vector<std::int32_t> data(count);
      for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<std::int32_t>(i) * 10 + me();
      small_messages().broadcast(std::span(data), root);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i)
        wrong += data[i] != static_cast<std::int32_t>(i) * 10 + root;
      EXPECT_EQ(wrong, 0u) << "count " << count << ", root " << root;
    }
  }
}

TEST(AllToAll, InPiecesWhenABlockIsLongerThanOneMessage) {
  for (bool in_place : {false, true}) {
    for (std::size_t block : {std::size_t{64}, std::size_t{65}, std::size_t{1001}}) {
      const auto ranks = static_cast<std::size_t>(n());
      std::vector<std::int32_t> input(block * ranks), separate(block * ranks);
      for (std::size_t i = 0; i < input.size(); ++i)
        input[i] = static_cast<std::int32_t>(i) * 10 + me();
      std::vector<std::int32_t>& output = in_place ? input : separate;
      small_messages().all_to_all(std::span<const std::int32_t>(input), std::span(output));
      std::size_t wrong = 0;
      for (std::size_t from = 0; from < ranks; ++from) {
        for (std::size_t k = 0; k < block; ++k) {
          const std::size_t sent_at = static_cast<std::size_t>(me()) * block + k;
          wrong += output[from * block + k] !=
                   static_cast<std::int32_t>(sent_at) * 10 + static_cast<std::int32_t>(from);
        }
      }
      EXPECT_EQ(wrong, 0u) << "block " << block << (in_place ? " in place" : "");
    }
  }
}

std::vector<std::byte> pattern(int sender, std::size_t size, Tag tag) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(sender) * 7 + tag) & 0xff);
  }
  return bytes;
}

TEST(SendRecv, LongMessagesInPartsKeepFifoWithShortOnes) {
  // Around the split point (256 bytes including the kind byte) and well past it.
  const std::vector<std::size_t> sizes = {0, 1, 254, 255, 256, 257, 511, 512, 10000, 3};
  for (std::size_t size : sizes) small_messages().send_bytes(right(), 21, pattern(me(), size, 21));
  for (std::size_t size : sizes) {
    EXPECT_EQ(small_messages().recv_bytes(left(), 21), pattern(left(), size, 21)) << size;
  }
}

TEST(SendRecv, ConcurrentReceiversOnOneTagGetWholeMessages) {
  // Two threads take long (split) messages from the same peer and tag: each
  // must get one whole message, never parts of both.
  constexpr int kMessages = 6;
  for (int k = 0; k < kMessages; ++k) {
    small_messages().send_bytes(right(), 22, pattern(me(), 1000, 22));
  }
  auto take_half = [] {
    std::size_t good = 0;
    for (int k = 0; k < kMessages / 2; ++k) {
      good += small_messages().recv_bytes(left(), 22) == pattern(left(), 1000, 22);
    }
    return good;
  };
  auto other = std::async(std::launch::async, take_half);
  const std::size_t good = take_half() + other.get();
  EXPECT_EQ(good, static_cast<std::size_t>(kMessages));
}

TEST(SendRecv, PointToPointOnOneThreadWhileCollectivesRunOnAnother) {
  constexpr int kRounds = 50;
  auto collectives = std::async(std::launch::async, [] {
    int wrong = 0;
    for (int round = 0; round < kRounds; ++round) {
      std::vector<std::int32_t> v(static_cast<std::size_t>(round + 1), me());
      group().all_sum(std::span(v));
      wrong += v.back() != n() * (n() - 1) / 2;
    }
    return wrong;
  });
  for (int round = 0; round < kRounds; ++round) {
    const auto size = static_cast<std::size_t>(round * 97);
    group().send_bytes(right(), 3, pattern(me(), size, 3));
    EXPECT_EQ(group().recv_bytes(left(), 3), pattern(left(), size, 3)) << round;
  }
  EXPECT_EQ(collectives.get(), 0);
}

TEST(SendRecv, AReceiverDoesNotWaitForTheSendersNextCall) {
  // Rank 0 sends a long message and then computes, calling nothing; rank 1's
  // receive must finish anyway (over TCP, rlx's progress thread moves it).
  using Clock = std::chrono::steady_clock;
  constexpr auto kBusy = std::chrono::milliseconds(2000);
  const std::size_t size = std::size_t{8} << 20;
  group().barrier();
  if (me() == 0) {
    group().send_bytes(1, 31, pattern(0, size, 31));
    std::this_thread::sleep_for(kBusy);
  } else if (me() == 1) {
    const auto start = Clock::now();
    EXPECT_EQ(group().recv_bytes(0, 31), pattern(0, size, 31));
    EXPECT_LT(Clock::now() - start, kBusy * 3 / 4);
  }
  group().barrier();
}

TEST(SendRecv, NeverMatchesTheProgramsOwnMpiTraffic) {
  // The program sends on MPI_COMM_WORLD with the same tag rlx uses.
  const int theirs = 1000 + me();
  MPI_Request request;
  MPI_Isend(&theirs, 1, MPI_INT, right(), 5, MPI_COMM_WORLD, &request);
  group().send_bytes(right(), 5, pattern(me(), 9, 5));
  EXPECT_EQ(group().recv_bytes(left(), 5), pattern(left(), 9, 5));
  int got = -1;
  MPI_Recv(&got, 1, MPI_INT, left(), 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  EXPECT_EQ(got, 1000 + left());
}

TEST(SendRecv, BadTagOrPeerIsAnInvalidArgument) {
  try {
    group().send_bytes(right(), kMaxTag + 1, {});
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
  }
  try {
    (void)group().recv_bytes(n(), 0);
    ADD_FAILURE() << "no error";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
  }
}

// Only under RLX_TIMEOUT_S=1 (ctest mpi_recv_timeout_*): other runs skip it.
TEST(RecvTimeout, ANeverSentMessageTimesOutNamingThePeer) {
  if (group().timeout() != std::chrono::seconds(1)) GTEST_SKIP() << "needs RLX_TIMEOUT_S=1";
  if (me() == 0) {
    const auto start = std::chrono::steady_clock::now();
    try {
      (void)group().recv_bytes(1, 77);
      ADD_FAILURE() << "no error";
    } catch (const CollectiveError& error) {
      EXPECT_EQ(error.kind(), ErrorKind::timeout);
      EXPECT_EQ(error.peer(), 1);
      EXPECT_EQ(error.rank(), 0);
      EXPECT_EQ(error.operation(), "recv_bytes");
      EXPECT_NE(std::string(error.what()).find("tag 77"), std::string::npos) << error.what();
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    EXPECT_GE(waited, std::chrono::milliseconds(990));
    EXPECT_LT(waited, std::chrono::seconds(10));
    for (int peer = 1; peer < n(); ++peer) group().send_bytes(peer, 78, {});
  } else {
    // Wait for rank 0 without a collective, which the 1 s deadline would abort.
    for (int attempt = 0;; ++attempt) {
      try {
        (void)group().recv_bytes(0, 78);
        break;
      } catch (const CollectiveError& error) {
        ASSERT_LT(attempt, 60) << error.what();
      }
    }
  }
  // The transport still works after a receive timed out.
  if (me() == 1) group().send_bytes(0, 77, pattern(1, 5, 77));
  if (me() == 0) {
    EXPECT_EQ(group().recv_bytes(1, 77), pattern(1, 5, 77));
  }
  group().barrier();
}

// The call check's op, on cells made as the transport makes them (this rank
// plays every rank): agreeing calls merge their payloads, any difference sets
// the flag whatever the order, and a set flag stays set.
class CallAgreementCells : public ::testing::Test {
 protected:
  using Cell = std::array<std::byte, sizeof(mpi::CallAgreement::Cell)>;

  Cell cell_of(const CollectiveCall& call, std::uint64_t inline_elements, float value = 0) {
    mpi::CallAgreement agreement;
    const auto payload = agreement.prepare(call, inline_elements);
    if (!payload.empty()) std::memcpy(payload.data(), &value, payload.size());
    Cell cell;
    std::memcpy(cell.data(), agreement.cell(), cell.size());
    return cell;
  }
  // Combines `in` into `inout` and says whether the result still agrees.
  static bool combine(const Cell& in, Cell& inout) {
    mpi::CallAgreement::combine(in.data(), inout.data());
    mpi::CallAgreement::Cell decoded;
    std::memcpy(&decoded, inout.data(), sizeof decoded);
    return (decoded.signature & mpi::CallAgreement::kDisagreed) == 0;
  }
  static float payload_of(const Cell& cell) {
    float value = 0;
    std::memcpy(&value, cell.data() + offsetof(mpi::CallAgreement::Cell, rest), sizeof value);
    return value;
  }

  const CollectiveCall sum1{.kind = CollectiveKind::all_reduce, .dtype = Dtype::f32, .count = 1};
};

TEST_F(CallAgreementCells, AgreeingCallsReduceTheirPayload) {
  Cell a = cell_of(sum1, 1, 1.5f);
  EXPECT_TRUE(combine(cell_of(sum1, 1, 2.0f), a));
  EXPECT_EQ(payload_of(a), 3.5f);
}

TEST_F(CallAgreementCells, AnyDifferenceIsFlaggedInEitherOrderAndStaysFlagged) {
  CollectiveCall max1 = sum1;
  max1.op = ReduceOp::max;
  CollectiveCall i32 = sum1;
  i32.dtype = Dtype::i32;
  CollectiveCall gather = sum1;
  gather.kind = CollectiveKind::all_gather;
  const CollectiveCall barrier{.kind = CollectiveKind::barrier};
  // Large calls whose counts differ only above the cell's low 22 bits.
  CollectiveCall big = sum1;
  big.count = std::uint64_t{1} << 30;
  CollectiveCall bigger = big;
  bigger.count += std::uint64_t{1} << 22;
  const std::pair<Cell, Cell> pairs[] = {
      {cell_of(sum1, 1, 1.0f), cell_of(max1, 1, 1.0f)},
      {cell_of(sum1, 1, 1.0f), cell_of(i32, 1, 1.0f)},
      {cell_of(sum1, 1, 1.0f), cell_of(gather, 1, 1.0f)},
      {cell_of(sum1, 1, 1.0f), cell_of(barrier, 0)},
      {cell_of(sum1, 1, 1.0f), cell_of(sum1, 0)},
      {cell_of(big, 0), cell_of(bigger, 0)},
  };
  for (const auto& [first, second] : pairs) {
    Cell forward = second;
    EXPECT_FALSE(combine(first, forward));
    Cell backward = first;
    EXPECT_FALSE(combine(second, backward));
    EXPECT_EQ(payload_of(backward), payload_of(first));  // the caller's data is left alone
    Cell agreeing = first;
    EXPECT_FALSE(combine(backward, agreeing));  // a flagged cell taints an agreeing one
  }
}

TEST_F(CallAgreementCells, GatheredBlocksAreMergedByOr) {
  const CollectiveCall gather{.kind = CollectiveKind::all_gather, .dtype = Dtype::u8, .count = 1};
  Cell mine = cell_of(gather, 4);
  Cell theirs = cell_of(gather, 4);
  mine[offsetof(mpi::CallAgreement::Cell, rest)] = std::byte{7};
  theirs[offsetof(mpi::CallAgreement::Cell, rest) + 2] = std::byte{9};
  EXPECT_TRUE(combine(theirs, mine));
  EXPECT_EQ(mine[offsetof(mpi::CallAgreement::Cell, rest)], std::byte{7});
  EXPECT_EQ(mine[offsetof(mpi::CallAgreement::Cell, rest) + 2], std::byte{9});
}

TEST(Watchdog, FiresForACallThatOutlivesTheTimeout) {
  std::promise<mpi::WatchedCall> fired;
  mpi::Watchdog watchdog(std::chrono::milliseconds(100),
                         [&](const mpi::WatchedCall& call, std::chrono::milliseconds waited) {
                           EXPECT_GE(waited, std::chrono::milliseconds(100));
                           fired.set_value(call);
                         });
  auto result = fired.get_future();
  const auto start = std::chrono::steady_clock::now();
  watchdog.arm({.call = {.kind = CollectiveKind::all_gather,
                         .op = ReduceOp::max,
                         .dtype = Dtype::bf16,
                         .count = 12345,
                         .sequence = 77}});
  ASSERT_EQ(result.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  const mpi::WatchedCall watched = result.get();
  EXPECT_FALSE(watched.setup);
  EXPECT_EQ(watched.call.kind, CollectiveKind::all_gather);
  EXPECT_EQ(watched.call.op, ReduceOp::max);
  EXPECT_EQ(watched.call.dtype, Dtype::bf16);
  EXPECT_EQ(watched.call.count, 12345u);
  EXPECT_EQ(watched.call.sequence, 77u);
}

TEST(Watchdog, StaysQuietWhileEveryCallEndsInTime) {
  bool fired = false;
  mpi::Watchdog watchdog(std::chrono::milliseconds(50),
                         [&](const mpi::WatchedCall&, std::chrono::milliseconds) { fired = true; });
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < end) {  // many short calls, one after another
    mpi::WatchedScope scope(watchdog, {.call = {.kind = CollectiveKind::barrier}});
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // and idle
  watchdog.stop();
  EXPECT_FALSE(fired);
}

// On ranks other than 0, prints only failures, each with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
  }
  void OnTestEnd(const ::testing::TestInfo& test) override {
    if (test.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, test.test_suite_name(), test.name());
    }
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace rlx

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  try {
    rlx::the_group = rlx::init();
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "mpi_transport_test: %s\n", error.what());
    return 1;
  }
  auto& group = *rlx::the_group;
  if (group.rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new rlx::FailurePrinter(group.rank()));
  } else {
    std::printf("mpi_transport_test: %d ranks over %s\n", group.world_size(),
                std::string(group.backend()).c_str());
  }
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // Every rank learns whether any rank failed, so the verdict is the job's.
  group.all_reduce(std::span(&failed, 1), rlx::ReduceOp::max);
  if (failed && group.rank() == 0) std::fprintf(stderr, "mpi_transport_test: a rank failed\n");
  return failed;
}
