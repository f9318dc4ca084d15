// The algorithms run by N threads over an in-process Links (queues between
// threads), for many rank counts and sizes, against a reference computed
// directly. The multi-process suite in tests/ runs them over real sockets.
#include "rlx/collectives/algorithms.h"

#include <bit>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "rlx/collectives/reduce.h"

namespace rlx {
namespace {

struct Message {
  CollectiveCall call;
  std::uint32_t step;
  std::vector<std::byte> bytes;
};

// Unbounded FIFOs between every (from, to, lane): sends never block.
class Fabric {
 public:
  void push(int from, int to, int lane, Message message) {
    {
      std::lock_guard lock(mutex_);
      queues_[{from, to, lane}].push_back(std::move(message));
    }
    cv_.notify_all();
  }
  Message pop(int from, int to, int lane) {
    std::unique_lock lock(mutex_);
    auto& queue = queues_[{from, to, lane}];
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return !queue.empty(); })) {
      throw std::runtime_error("in-process fabric: receive timed out");
    }
    Message message = std::move(queue.front());
    queue.pop_front();
    return message;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, std::deque<Message>> queues_;
};

class InProcessLinks final : public Links {
 public:
  InProcessLinks(Fabric& fabric, int rank, int n, int lanes)
      : fabric_(fabric), rank_(rank), n_(n), lanes_(lanes) {}
  int rank() const override { return rank_; }
  int world_size() const override { return n_; }
  int lanes() const override { return lanes_; }
  std::span<std::byte> scratch(std::size_t bytes) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_;
  }
  void exchange(const CollectiveCall& call, std::uint32_t step, std::span<const StepSend> sends,
                std::span<const StepRecv> recvs) override {
    for (const auto& send : sends) {
      check_peer(send.peer, send.lane);
      fabric_.push(rank_, send.peer, send.lane,
                   {call, step, {send.bytes.begin(), send.bytes.end()}});
    }
    for (const auto& recv : recvs) {
      check_peer(recv.peer, recv.lane);
      Message m = fabric_.pop(recv.peer, rank_, recv.lane);
      if (!(m.call == call) || m.step != step || m.bytes.size() != recv.into.size()) {
        throw std::runtime_error("mismatch: " + call.describe() + " step " + std::to_string(step) +
                                 " got " + m.call.describe() + " step " + std::to_string(m.step));
      }
      if (recv.reduce) {
        const std::size_t count = recv.into.size() / size_of(call.dtype);
        reduce_into({recv.into.data(), count, call.dtype}, {m.bytes.data(), count, call.dtype},
                    call.op);
      } else if (!m.bytes.empty()) {
        std::memcpy(recv.into.data(), m.bytes.data(), m.bytes.size());
      }
    }
  }

 private:
  void check_peer(int peer, int lane) const {
    if (peer == rank_ || peer < 0 || peer >= n_ || lane < 0 || lane >= lanes_) {
      throw std::logic_error("bad peer/lane");
    }
  }
  Fabric& fabric_;
  int rank_, n_, lanes_;
  std::vector<std::byte> scratch_;
};

// Runs fn(links) on n threads; rethrows the first failure.
template <class Fn>
void run_ranks(int n, int lanes, Fn fn) {
  Fabric fabric;
  std::vector<std::thread> threads;
  std::mutex error_mutex;
  std::string error;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      InProcessLinks links(fabric, r, n, lanes);
      try {
        fn(links);
      } catch (const std::exception& e) {
        std::lock_guard lock(error_mutex);
        error = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(error, "");
}

// Rank r's element i: distinct across ranks and elements, exact in every dtype.
std::int64_t contribution(int rank, std::size_t i) {
  return static_cast<std::int64_t>((i * 7 + static_cast<std::size_t>(rank) * 3) % 11) - 5;
}

class AlgorithmTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(AlgorithmTest, AllReduceEveryAlgorithmMatchesTheReference) {
  const auto [n, lanes] = GetParam();
  using Algo = void (*)(Links&, const CollectiveCall&, ElementSpan);
  const Algo chosen_by_size = [](Links& links, const CollectiveCall& call, ElementSpan data) {
    all_reduce(links, call, data, Tuning{});
  };
  for (Algo algo : {&all_reduce_ring, &all_reduce_recursive_doubling, chosen_by_size}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1),
                              std::size_t{13}, std::size_t{1000}, std::size_t{65537}}) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::max}) {
        run_ranks(n, lanes, [&](Links& links) {
          std::vector<std::int64_t> data(count), want(count);
          for (std::size_t i = 0; i < count; ++i) {
            data[i] = contribution(links.rank(), i);
            want[i] = contribution(0, i);
            for (int r = 1; r < n; ++r) {
              const auto v = contribution(r, i);
              want[i] = op == ReduceOp::sum ? want[i] + v : std::max(want[i], v);
            }
          }
          const CollectiveCall call{CollectiveKind::all_reduce, op, Dtype::i64, count, 1};
          algo(links, call, ElementSpan::of(std::span(data)));
          if (data != want)
            throw std::runtime_error("wrong result, count " + std::to_string(count));
        });
      }
    }
  }
}

TEST_P(AlgorithmTest, FloatResultsAreBitIdenticalOnEveryRank) {
  const auto [n, lanes] = GetParam();
  std::vector<std::vector<float>> results(static_cast<std::size_t>(n));
  run_ranks(n, lanes, [&](Links& links) {
    std::vector<float> data(100003);
    for (std::size_t i = 0; i < data.size(); ++i) {
      data[i] = 1.0f / static_cast<float>(i + 1 + static_cast<std::size_t>(links.rank()) * 31);
    }
    all_reduce(links, {CollectiveKind::all_reduce, ReduceOp::sum, Dtype::f32, data.size(), 1},
               ElementSpan::of(std::span(data)), Tuning{});
    results[static_cast<std::size_t>(links.rank())] = data;
  });
  for (int r = 1; r < n; ++r) {
    ASSERT_EQ(0, std::memcmp(results[0].data(), results[static_cast<std::size_t>(r)].data(),
                             results[0].size() * sizeof(float)));
  }
}

TEST_P(AlgorithmTest, AllGatherConcatenatesInRankOrder) {
  const auto [n, lanes] = GetParam();
  using Algo = void (*)(Links&, const CollectiveCall&, ConstElementSpan, ElementSpan);
  std::vector<Algo> algos = {&all_gather_ring, &all_gather_direct, &all_gather};
  if (std::has_single_bit(static_cast<unsigned>(n)))
    algos.push_back(&all_gather_recursive_doubling);
  for (Algo algo : algos) {
    // 65537 elements: 256 KiB and one, which the direct exchange splits over the lanes.
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{4099}, std::size_t{65537}}) {
      run_ranks(n, lanes, [&](Links& links) {
        std::vector<std::int32_t> input(count), output(count * static_cast<std::size_t>(n), -1);
        for (std::size_t i = 0; i < count; ++i) {
          input[i] = static_cast<std::int32_t>(contribution(links.rank(), i));
        }
        algo(links, {CollectiveKind::all_gather, ReduceOp::sum, Dtype::i32, count, 2},
             ConstElementSpan::of(std::span<const std::int32_t>(input)),
             ElementSpan::of(std::span(output)));
        for (int r = 0; r < n; ++r) {
          for (std::size_t i = 0; i < count; ++i) {
            if (output[static_cast<std::size_t>(r) * count + i] != contribution(r, i)) {
              throw std::runtime_error("wrong block " + std::to_string(r));
            }
          }
        }
      });
    }
  }
}

TEST_P(AlgorithmTest, ReduceScatterLeavesEachRankItsBlock) {
  const auto [n, lanes] = GetParam();
  const std::size_t block = 777;
  run_ranks(n, lanes, [&](Links& links) {
    std::vector<std::int64_t> data(block * static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = contribution(links.rank(), i);
    reduce_scatter_ring(links,
                        {CollectiveKind::reduce_scatter, ReduceOp::sum, Dtype::i64, block, 3},
                        ElementSpan::of(std::span(data)));
    const std::size_t base = static_cast<std::size_t>(links.rank()) * block;
    for (std::size_t i = 0; i < block; ++i) {
      std::int64_t want = 0;
      for (int r = 0; r < n; ++r) want += contribution(r, base + i);
      if (data[base + i] != want) throw std::runtime_error("wrong reduce-scatter");
    }
  });
}

TEST_P(AlgorithmTest, BroadcastFromEveryRoot) {
  const auto [n, lanes] = GetParam();
  for (int root = 0; root < n; ++root) {
    run_ranks(n, lanes, [&](Links& links) {
      std::vector<std::int32_t> data(301, links.rank() == root ? root * 10 + 1 : -7);
      CollectiveCall call{CollectiveKind::broadcast, ReduceOp::sum, Dtype::i32, data.size(), 4};
      call.root = root;
      broadcast(links, call, ElementSpan::of(std::span(data)));
      for (auto v : data) {
        if (v != root * 10 + 1) throw std::runtime_error("wrong broadcast");
      }
    });
  }
}

// Gathers every rank's block to `root`, scatters the blocks back and reduces
// them to `root`, checking each result.
void run_rooted_calls(int n, int lanes, int root) {
  run_ranks(n, lanes, [&](Links& links) {
    const int rank = links.rank();
    const std::size_t count = 5;
    std::vector<std::int32_t> mine(count), all(count * static_cast<std::size_t>(n), -1);
    for (std::size_t i = 0; i < count; ++i) mine[i] = rank * 100 + static_cast<int>(i);
    CollectiveCall call{CollectiveKind::gather, ReduceOp::sum, Dtype::i32, count, 1};
    call.root = root;
    gather_direct(links, call, ConstElementSpan::of(std::span<const std::int32_t>(mine)),
                  ElementSpan::of(std::span(all)));
    for (std::size_t i = 0; rank == root && i < all.size(); ++i) {
      if (all[i] != static_cast<int>(i / count) * 100 + static_cast<int>(i % count)) {
        throw std::runtime_error("wrong gather");
      }
    }
    call.kind = CollectiveKind::scatter;
    call.sequence = 2;
    std::vector<std::int32_t> got(count, -1);
    scatter_direct(links, call, ConstElementSpan::of(std::span<const std::int32_t>(all)),
                   ElementSpan::of(std::span(got)));
    if (got != mine) throw std::runtime_error("wrong scatter");
    call.kind = CollectiveKind::reduce;
    call.sequence = 3;
    reduce_binomial(links, call, ElementSpan::of(std::span(mine)));
    const int ranks_sum = n * (n - 1) / 2 * 100;
    for (std::size_t i = 0; rank == root && i < count; ++i) {
      if (mine[i] != ranks_sum + n * static_cast<int>(i)) throw std::runtime_error("wrong reduce");
    }
  });
}

TEST_P(AlgorithmTest, ReduceGatherAndScatterFromEveryRoot) {
  const auto [n, lanes] = GetParam();
  for (int root = 0; root < n; ++root) run_rooted_calls(n, lanes, root);
}

// More peers than one step has room for: the root takes them over steps.
TEST(RootedAlgorithms, GatherAndScatterWithMorePeersThanAStepHolds) {
  for (int lanes : {1, 2}) run_rooted_calls(70, lanes, 3);
}

TEST_P(AlgorithmTest, BarrierCompletes) {
  const auto [n, lanes] = GetParam();
  run_ranks(n, lanes, [&](Links& links) {
    for (std::uint64_t i = 0; i < 3; ++i) {
      barrier_dissemination(links, {CollectiveKind::barrier, ReduceOp::sum, Dtype::u8, 0, i});
    }
  });
}

INSTANTIATE_TEST_SUITE_P(RanksAndLanes, AlgorithmTest,
                         ::testing::Values(std::make_tuple(2, 1), std::make_tuple(2, 2),
                                           std::make_tuple(3, 1), std::make_tuple(3, 2),
                                           std::make_tuple(4, 2), std::make_tuple(5, 1),
                                           std::make_tuple(7, 3), std::make_tuple(8, 2)),
                         [](const auto& test) {
                           return "n" + std::to_string(std::get<0>(test.param)) + "_lanes" +
                                  std::to_string(std::get<1>(test.param));
                         });

TEST(InProcessLinks, DisagreeingRanksAreDetected) {
  EXPECT_FATAL_FAILURE(run_ranks(2, 1,
                                 [&](Links& links) {
                                   std::vector<float> data(links.rank() == 0 ? 10 : 20);
                                   all_reduce(links,
                                              {CollectiveKind::all_reduce, ReduceOp::sum,
                                               Dtype::f32, data.size(), 1},
                                              ElementSpan::of(std::span(data)), Tuning{});
                                 }),
                       "mismatch");
}

TEST(InProcessLinks, RecursiveDoublingAllGatherRefusesThreeRanks) {
  EXPECT_FATAL_FAILURE(
      run_ranks(3, 1,
                [&](Links& links) {
                  std::vector<float> input(4), output(12);
                  all_gather_recursive_doubling(
                      links,
                      {CollectiveKind::all_gather, ReduceOp::sum, Dtype::f32, input.size(), 1},
                      ConstElementSpan::of(std::span<const float>(input)),
                      ElementSpan::of(std::span(output)));
                }),
      "power-of-two world size, not 3");
}

}  // namespace
}  // namespace rlx
