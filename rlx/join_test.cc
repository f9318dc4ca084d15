// rlx::join through an in-memory store: ranks as threads of this process
// over real loopback sockets, and the store's and the caller's mistakes as
// errors that say what to check.
#include "rlx/join.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rlx/transport/errors.h"

namespace rlx {
namespace {

// What torch's TCPStore is to its ranks: set, and a get that waits.
class MemoryStore {
 public:
  KeyValueStore view() {
    return {.set =
                [this](const std::string& key, const std::string& value) {
                  std::lock_guard lock(mutex_);
                  values_[key] = value;
                  changed_.notify_all();
                },
            .get =
                [this](const std::string& key) {
                  std::unique_lock lock(mutex_);
                  if (!changed_.wait_for(lock, std::chrono::seconds(20),
                                         [&] { return values_.contains(key); }))
                    throw std::runtime_error("no value for " + key);
                  return values_[key];
                }};
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

TEST(Join, RanksMeetThroughTheStoreAndReduce) {
  constexpr int kSize = 3;
  MemoryStore store;
  std::vector<float> sums(kSize);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kSize; ++r) {
    ranks.emplace_back([&, r] {
      Group group = join(r, kSize, store.view(), {.backend = "tcp"});
      std::vector<float> value{static_cast<float>(r + 1)};
      group->all_sum(std::span(value));
      sums[static_cast<std::size_t>(r)] = value[0];
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(sums, std::vector<float>(kSize, 6.0f));
}

TEST(Join, AGroupOfOneNeedsNoStore) {
  Group group = join(0, 1, {}, {});
  std::vector<int> value{7};
  group->all_sum(std::span(value));
  EXPECT_EQ(value[0], 7);
  EXPECT_EQ(group.size(), 1);
}

TEST(Join, ARankOutsideTheGroupIsRefused) {
  try {
    join(2, 2, MemoryStore().view());
    FAIL() << "rank 2 of 2 joined";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("ranks count from 0"), std::string::npos)
        << error.what();
  }
}

TEST(Join, MpiCannotJoinThroughAStore) {
  try {
    join(0, 2, MemoryStore().view(), {.backend = "mpi"});
    FAIL() << "mpi joined through a store";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("tcp or verbs"), std::string::npos) << error.what();
  }
}

TEST(Join, AStoreThatGivesUpNamesTheKeyItWaitedFor) {
  KeyValueStore broken{.set = [](const std::string&, const std::string&) {},
                       .get = [](const std::string& key) -> std::string {
                         throw std::runtime_error("Socket Timeout waiting for " + key);
                       }};
  try {
    join(1, 2, broken);
    FAIL() << "joined without rank 0's token";
  } catch (const CollectiveError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::timeout);
    const std::string text = error.what();
    EXPECT_NE(text.find("'rlx/token'"), std::string::npos) << text;
    EXPECT_NE(text.find("Socket Timeout"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace rlx
