#include "rlx/backends/singleton/singleton_transport.h"

#include <functional>
#include <initializer_list>
#include <numeric>

#include <gtest/gtest.h>

namespace rlx {
namespace {

using namespace std::chrono_literals;

TEST(Singleton, IsRankZeroOfOne) {
  SingletonTransport group;
  EXPECT_EQ(group.rank(), 0);
  EXPECT_EQ(group.world_size(), 1);
  EXPECT_EQ(group.backend(), "singleton");
}

// Every collective, blocking and non-blocking, takes typed spans: on a group
// of one each is the identity (or a copy to the output).
TEST(Singleton, EveryCollectiveHasATypedForm) {
  SingletonTransport group;
  std::vector<double> data{1.5, 2.5};
  const std::vector<double> in{3.0, 4.0};
  std::vector<double> out(2);
  const std::vector<std::size_t> counts{2};
  std::vector<double> writable_in = in;
  group.all_reduce(std::span(data), ReduceOp::max);
  group.all_sum(std::span(data));
  group.reduce(std::span(data), ReduceOp::sum, 0);
  group.broadcast(std::span(data), 0);
  EXPECT_EQ(data, (std::vector<double>{1.5, 2.5}));
  // Inputs as std::span<const T> and as std::span(vector) of T alike.
  auto check_every_call_with = [&](auto input) {
    for (auto call : std::initializer_list<std::function<void()>>{
             [&] { group.all_gather(input, std::span(out)); },
             [&] { group.reduce_scatter(input, std::span(out), ReduceOp::sum); },
             [&] { group.all_to_all(input, std::span(out)); },
             [&] { group.gather(input, std::span(out), 0); },
             [&] { group.scatter(input, std::span(out), 0); },
             [&] { group.all_gather_v(input, std::span(out), counts); },
             [&] { group.all_to_all_v(input, counts, std::span(out), counts); },
             [&] { group.iall_gather(input, std::span(out)).wait(); },
             [&] { group.ireduce_scatter(input, std::span(out), ReduceOp::sum).wait(); },
             [&] { group.iall_to_all(input, std::span(out)).wait(); },
             [&] { group.igather(input, std::span(out), 0).wait(); },
             [&] { group.iscatter(input, std::span(out), 0).wait(); },
             [&] { group.iall_gather_v(input, std::span(out), counts).wait(); },
             [&] { group.iall_to_all_v(input, counts, std::span(out), counts).wait(); }}) {
      out.assign(2, 0.0);
      call();
      EXPECT_EQ(out, in);
    }
  };
  check_every_call_with(std::span<const double>(in));
  check_every_call_with(std::span(writable_in));
  check_every_call_with(std::span(in));
  group.iall_reduce(std::span(data), ReduceOp::min).wait();
  group.iall_sum(std::span(data)).wait();
  group.ireduce(std::span(data), ReduceOp::prod, 0).wait();
  group.ibroadcast(std::span(data), 0).wait();
  EXPECT_EQ(data, (std::vector<double>{1.5, 2.5}));
}

// A receive still waiting when its group is destroyed ends by its deadline
// (timeout; or as closed, when the destructor came before it started), the
// one posted behind it fails as closed, and nothing touches the destroyed
// group afterwards.
TEST(Singleton, DestroyingTheGroupEndsOutstandingReceivesByTheirDeadline) {
  std::vector<std::byte> first(8), second(8);
  Request waiting, behind;
  const auto start = std::chrono::steady_clock::now();
  {
    SingletonTransport group(200ms);
    waiting = group.irecv(0, 3, std::span(first));
    behind = group.irecv(0, 3, std::span(second));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  try {
    wait_all(std::vector<Request>{waiting, behind});
    ADD_FAILURE() << "receives with no message completed";
  } catch (const CollectiveError& error) {
    EXPECT_TRUE(error.kind() == ErrorKind::timeout ||
                error.kind() == ErrorKind::backend_unavailable)
        << error.what();
  }
  try {
    behind.wait();
    ADD_FAILURE() << "the receive posted behind ran after the group closed";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::backend_unavailable) << error.what();
  }
}

TEST(Singleton, SelfSendsCompleteNonBlocking) {
  SingletonTransport group;
  std::vector<std::int32_t> sent{1, 2, 3}, got(3);
  const Request receive = group.irecv(0, 9, std::span(got));
  const Request send = group.isend(0, 9, std::span(sent));
  wait_all(std::vector<Request>{send, receive});
  EXPECT_EQ(receive.bytes(), 3 * sizeof(std::int32_t));
  EXPECT_EQ(got, sent);
}

TEST(Singleton, CollectivesAreTheIdentityForEveryDtype) {
  SingletonTransport group;
  std::vector<double> values(17);
  std::iota(values.begin(), values.end(), -3.0);
  const auto before = values;
  group.all_sum(std::span(values));
  EXPECT_EQ(values, before);
  for (ReduceOp op : {ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
    group.all_reduce(std::span(values), op);
  }
  EXPECT_EQ(values, before);
  std::vector<bfloat16_t> halves(5, bfloat16_t(1.5f));
  group.all_sum(std::span(halves));
  EXPECT_EQ(static_cast<float>(halves[4]), 1.5f);
  std::vector<double> gathered(values.size());
  group.all_gather(std::span<const double>(values), std::span(gathered));
  EXPECT_EQ(gathered, values);
  std::vector<float> empty;
  group.all_sum(std::span(empty));
  group.barrier();
}

TEST(Singleton, SelfSendsAreReceivedInOrderPerTag) {
  SingletonTransport group;
  const std::vector<std::byte> first(3, std::byte{1}), second(0), other(70000, std::byte{7});
  group.send_bytes(0, 5, first);
  group.send_bytes(0, 6, other);
  group.send_bytes(0, 5, second);
  EXPECT_EQ(group.recv_bytes(0, 6), other);
  EXPECT_EQ(group.recv_bytes(0, 5), first);
  EXPECT_EQ(group.recv_bytes(0, 5), second);
}

TEST(Singleton, ReceiveWithNothingSentTimesOutClearly) {
  SingletonTransport group(100ms);
  try {
    group.recv_bytes(0, 3);
    FAIL() << "expected a timeout";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::timeout);
    EXPECT_NE(std::string(error.what()).find("recv_bytes (tag 3)"), std::string::npos)
        << error.what();
  }
}

TEST(Singleton, SelfSendsBeyondTheCapAreRefused) {
  SingletonTransport group(1s, 10);
  group.send_bytes(0, 0, std::vector<std::byte>(10));
  try {
    group.send_bytes(0, 0, std::vector<std::byte>(1));
    FAIL() << "expected resource_exhausted";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::resource_exhausted);
    EXPECT_NE(std::string(error.what()).find("RLX_UNEXPECTED_BYTES"), std::string::npos);
  }
  EXPECT_EQ(group.recv_bytes(0, 0).size(), 10u);
}

TEST(Singleton, InvalidArgumentsAreRejected) {
  SingletonTransport group;
  auto expect_invalid = [](auto&& call, const char* fragment) {
    try {
      call();
      FAIL() << "accepted";
    } catch (const CollectiveError& error) {
      EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  };
  expect_invalid([&] { group.send_bytes(1, 0, {}); }, "peer rank 1 does not exist");
  expect_invalid([&] { group.recv_bytes(-1, 0); }, "peer rank -1 does not exist");
  expect_invalid([&] { group.send_bytes(0, kMaxTag + 1, {}); }, "above the largest user tag");
  std::vector<float> in(4), out(3);
  expect_invalid([&] { group.all_gather(std::span<const float>(in), std::span(out)); },
                 "world_size x input");
  std::vector<double> wrong_type(4);
  expect_invalid(
      [&] {
        group.all_gather(ConstElementSpan::of(std::span<const float>(in)),
                         ElementSpan::of(std::span(wrong_type)));
      },
      "dtypes differ");
  expect_invalid([&] { group.all_sum(ElementSpan{nullptr, 4, Dtype::f32}); }, "null");
}

}  // namespace
}  // namespace rlx
