#include "rlx/transport/point_to_point_stream.h"

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace rlx {
namespace {

using Key = PointToPointStream::Key;

TEST(PointToPointStream, OneKeysOperationsRunInPostingOrderOneAtATime) {
  PointToPointStream stream;
  std::vector<int> order;
  std::atomic<int> running{0};
  std::vector<Request> requests;
  for (int i = 0; i < 50; ++i) {
    requests.push_back(stream.post({.peer = 1, .tag = 7}, [&, i] {
      EXPECT_EQ(running.fetch_add(1), 0);
      order.push_back(i);
      running.fetch_sub(1);
      return static_cast<std::size_t>(i);
    }));
  }
  // A blocking call of the same key runs after them, on this thread.
  stream.run_after_posted({.peer = 1, .tag = 7}, [&] { order.push_back(100); });
  ASSERT_EQ(order.size(), 51u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
    EXPECT_TRUE(requests[static_cast<std::size_t>(i)].test());
    EXPECT_EQ(requests[static_cast<std::size_t>(i)].bytes(), static_cast<std::size_t>(i));
  }
  EXPECT_EQ(order.back(), 100);
}

TEST(PointToPointStream, DifferentKeysRunAtOnce) {
  PointToPointStream stream;
  // The first waits for the second, of another key: it completes only when
  // both run at the same time.
  std::promise<void> released;
  const Request first = stream.post({.peer = 0, .tag = 1}, [&] {
    released.get_future().wait();
    return std::size_t{4};
  });
  const Request second = stream.post({.peer = 0, .tag = 2}, [&] {
    released.set_value();
    return std::size_t{0};
  });
  first.wait();
  second.wait();
  EXPECT_EQ(first.bytes(), 4u);
}

// Keys posted back to back, faster than idle workers wake, each still get
// a worker: every operation here waits for all the others to have started.
TEST(PointToPointStream, KeysPostedInABurstAllRunAtOnce) {
  PointToPointStream stream;
  stream.post({.peer = 0, .tag = 0}, [] { return std::size_t{0}; }).wait();
  constexpr int kKeys = 16;
  std::atomic<int> started{0};
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<Request> requests;
  for (int i = 0; i < kKeys; ++i) {
    requests.push_back(stream.post({.peer = i, .tag = 0}, [&] {
      started.fetch_add(1);
      while (started.load() < kKeys && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::yield();
      }
      return std::size_t{0};
    }));
  }
  for (const Request& request : requests) request.wait();
  EXPECT_EQ(started.load(), kKeys);
}

TEST(PointToPointStream, AnErrorIsThrownByWaitAndTheKeyCarriesOn) {
  PointToPointStream stream;
  const Key key{.peer = 2, .tag = 3};
  const Request failing =
      stream.post(key, []() -> std::size_t { throw std::runtime_error("peer lost"); });
  const Request next = stream.post(key, [] { return std::size_t{1}; });
  EXPECT_THROW(failing.wait(), std::runtime_error);
  EXPECT_THROW(failing.test(), std::runtime_error);
  next.wait();
  EXPECT_EQ(next.bytes(), 1u);
}

TEST(PointToPointStream, StopLetsTheRunningOperationFinishAndFailsThePostedOnes) {
  PointToPointStream stream;
  const Key key{.peer = 1, .tag = 0};
  std::promise<void> started, release;
  const Request running = stream.post(key, [&] {
    started.set_value();
    release.get_future().wait();
    return std::size_t{8};
  });
  const Request queued = stream.post(key, [] { return std::size_t{0}; });
  started.get_future().wait();
  std::thread stopper([&] { stream.stop(std::make_exception_ptr(std::runtime_error("closed"))); });
  EXPECT_THROW(queued.wait(), std::runtime_error);  // failed by stop, before the running one ends
  release.set_value();
  stopper.join();
  running.wait();
  EXPECT_EQ(running.bytes(), 8u);
  EXPECT_THROW(stream.post(key, [] { return std::size_t{0}; }).wait(), std::runtime_error);
}

}  // namespace
}  // namespace rlx
