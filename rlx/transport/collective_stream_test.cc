#include "rlx/transport/collective_stream.h"

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace rlx {
namespace {

using namespace std::chrono_literals;

TEST(CollectiveStream, JobsRunOneAtATimeInTheOrderSubmitted) {
  CollectiveStream stream;
  std::vector<int> order;
  std::atomic<int> running{0};
  std::vector<Request> requests;
  for (int i = 0; i < 20; ++i) {
    requests.push_back(stream.submit([&, i] {
      EXPECT_EQ(running.fetch_add(1), 0);
      order.push_back(i);
      running.fetch_sub(1);
    }));
  }
  // A blocking call issued behind them runs after all of them.
  EXPECT_TRUE(stream.run_in_order([&] { order.push_back(100); }));
  for (const Request& request : requests) EXPECT_TRUE(request.test());
  ASSERT_EQ(order.size(), 21u);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(order.back(), 100);
}

// The inline call's turn is taken without the lock: a job queued just
// before it must still run first and never beside it.
TEST(CollectiveStream, InlineCallsAndJobsInterleavedNeverOverlapOrReorder) {
  CollectiveStream stream;
  std::atomic<int> running{0};
  int finished_jobs = 0;
  std::vector<Request> requests;
  for (int i = 0; i < 20000; ++i) {
    if (i % 3 != 2) {
      requests.push_back(stream.submit([&] {
        EXPECT_EQ(running.fetch_add(1), 0);
        ++finished_jobs;
        running.fetch_sub(1);
      }));
      continue;
    }
    const int submitted = static_cast<int>(requests.size());
    ASSERT_TRUE(stream.run_in_order([&] {
      EXPECT_EQ(running.fetch_add(1), 0);
      EXPECT_EQ(finished_jobs, submitted);
      running.fetch_sub(1);
    }));
  }
  for (const Request& request : requests) request.wait();
  EXPECT_EQ(finished_jobs, static_cast<int>(requests.size()));
}

// The same with the jobs queued from another thread, so that a queueing
// races the lock-free turn rather than preceding it.
TEST(CollectiveStream, JobsQueuedFromAnotherThreadNeverOverlapAnInlineCall) {
  CollectiveStream stream;
  std::atomic<int> running{0};
  std::thread submitter([&] {
    std::vector<Request> requests;
    for (int i = 0; i < 5000; ++i) {
      requests.push_back(stream.submit([&] {
        EXPECT_EQ(running.fetch_add(1), 0);
        running.fetch_sub(1);
      }));
    }
    for (const Request& request : requests) request.wait();
  });
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(stream.run_in_order([&] {
      EXPECT_EQ(running.fetch_add(1), 0);
      running.fetch_sub(1);
    }));
  }
  submitter.join();
}

TEST(CollectiveStream, AJobsErrorIsThrownByWaitAndTest) {
  CollectiveStream stream;
  const Request failing = stream.submit([] { throw std::runtime_error("peer lost"); });
  EXPECT_THROW(failing.wait(), std::runtime_error);
  EXPECT_THROW(failing.test(), std::runtime_error);
  EXPECT_NO_THROW(stream.submit([] {}).wait());  // the stream itself carries on
}

// Another thread's blocking call, held running until release().
class BlockingCallElsewhere {
 public:
  explicit BlockingCallElsewhere(CollectiveStream& stream)
      : thread_([this, &stream] {
          stream.run_in_order([this] {
            entered_.set_value();
            leave_.get_future().wait();
          });
        }) {
    entered_.get_future().wait();
  }
  ~BlockingCallElsewhere() { release(); }
  void release() {
    if (!thread_.joinable()) return;
    leave_.set_value();
    thread_.join();
  }

 private:
  std::promise<void> entered_, leave_;
  std::thread thread_;
};

TEST(CollectiveStream, ASecondThreadsBlockingCallIsRefusedNotQueued) {
  CollectiveStream stream;
  BlockingCallElsewhere first(stream);
  bool ran = false;
  EXPECT_FALSE(stream.run_in_order([&] { ran = true; }));
  EXPECT_FALSE(ran);
  first.release();
  EXPECT_TRUE(stream.run_in_order([&] { ran = true; }));
  EXPECT_TRUE(ran);
}

TEST(CollectiveStream, ASecondThreadsBlockingCallIsRefusedEvenWithAJobQueued) {
  CollectiveStream stream;
  BlockingCallElsewhere first(stream);
  const Request queued = stream.submit([] {});  // waits for the first call
  bool ran = false;
  EXPECT_FALSE(stream.run_in_order([&] { ran = true; }));
  EXPECT_FALSE(ran);
  first.release();
  queued.wait();
}

TEST(CollectiveStream, StopFinishesTheRunningJobAndFailsTheQueuedOnes) {
  CollectiveStream stream;
  std::promise<void> started, release;
  const std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> finished{false};
  const Request running = stream.submit([&] {
    started.set_value();
    released.wait();
    finished = true;
  });
  const Request queued = stream.submit([] { ADD_FAILURE() << "ran after stop"; });
  started.get_future().wait();
  std::thread stopper([&] { stream.stop(std::make_exception_ptr(std::runtime_error("closed"))); });
  // Once stop has begun, new work fails at once; only then may the running
  // job end (else the stream could start the queued one first). Probes
  // submitted before that are queued, and stop fails them with the rest.
  bool stopping = false;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!stopping && std::chrono::steady_clock::now() < deadline) {
    try {
      stream.submit([] {}).test();
      std::this_thread::yield();
    } catch (const std::runtime_error&) {
      stopping = true;
    }
  }
  EXPECT_TRUE(stopping);
  release.set_value();
  stopper.join();
  EXPECT_TRUE(finished);
  EXPECT_NO_THROW(running.wait());
  EXPECT_THROW(queued.wait(), std::runtime_error);
  EXPECT_THROW(stream.submit([] {}).wait(), std::runtime_error);
}

TEST(CollectiveStream, ADefaultRequestHasCompleted) {
  const Request done;
  EXPECT_TRUE(done.test());
  EXPECT_NO_THROW(done.wait());
}

}  // namespace
}  // namespace rlx
