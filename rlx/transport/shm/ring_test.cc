#include "rlx/transport/shm/ring.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

namespace rlx::shm {
namespace {

using namespace std::chrono_literals;

// Shared (with forked children), zeroed, page-aligned memory: a ring, and
// the two sides' doorbells after it.
class SharedMemory {
 public:
  explicit SharedMemory(std::size_t bytes) : bytes_(bytes + 4096) {
    void* memory =
        ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) throw std::runtime_error("mmap failed");
    data_ = static_cast<std::byte*>(memory);
    bells_ = new (data_ + bytes) Doorbell[2];
  }
  ~SharedMemory() { ::munmap(data_, bytes_); }
  std::byte* data() const { return data_; }
  Doorbell* producer_bell() const { return &bells_[0]; }
  Doorbell* consumer_bell() const { return &bells_[1]; }

 private:
  std::size_t bytes_;
  std::byte* data_;
  Doorbell* bells_;
};

RingWait producer_wait(const SharedMemory& memory, Deadline deadline, SpinPolicy policy = {}) {
  return {.own = memory.producer_bell(),
          .other = memory.consumer_bell(),
          .policy = policy,
          .deadline = deadline};
}

RingWait consumer_wait(const SharedMemory& memory, Deadline deadline, SpinPolicy policy = {}) {
  return {.own = memory.consumer_bell(),
          .other = memory.producer_bell(),
          .policy = policy,
          .deadline = deadline};
}

std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return bytes;
}

// The next message: its tag and payload, or nullopt at the deadline.
std::optional<std::pair<Tag, std::vector<std::byte>>> receive(MessageRing& ring, RingWait& wait) {
  wait.site = [] { return ErrorSite{.operation = "test"}; };
  const auto header = ring.take_header(wait);
  if (!header) return std::nullopt;
  std::vector<std::byte> payload(header->length);
  if (!ring.take_payload(payload, wait)) return std::nullopt;
  return std::make_pair(header->tag, std::move(payload));
}

constexpr std::size_t kCapacity = 256;

// Sizes around the header, the padding, a piece (a quarter of the ring,
// header included: 48 B of payload), the ring's capacity and well past it.
const std::vector<std::size_t> kSizes = {0,   1,   7,   8,   9,   47,  48,   49,      56, 57, 64,
                                         100, 240, 241, 256, 257, 773, 4096, 1 << 20, 3,  0};

TEST(MessageRing, EverySizeArrivesWholeTaggedAndInOrderThroughASmallRing) {
  SharedMemory memory(MessageRing::footprint(kCapacity));
  MessageRing producer = MessageRing::create(memory.data(), kCapacity);
  MessageRing consumer = MessageRing::attach(memory.data(), kCapacity);
  std::thread sender([&] {
    RingWait wait = producer_wait(memory, Clock::now() + 10s);
    for (std::size_t i = 0; i < kSizes.size(); ++i) {
      ASSERT_TRUE(
          producer.send(static_cast<Tag>(i), pattern(kSizes[i], static_cast<unsigned>(i)), wait));
    }
  });
  RingWait wait = consumer_wait(memory, Clock::now() + 10s);
  for (std::size_t i = 0; i < kSizes.size(); ++i) {
    const auto message = receive(consumer, wait);
    ASSERT_TRUE(message.has_value()) << "message " << i;
    EXPECT_EQ(message->first, static_cast<Tag>(i));
    EXPECT_EQ(message->second, pattern(kSizes[i], static_cast<unsigned>(i)))
        << "size " << kSizes[i];
  }
  sender.join();
  EXPECT_FALSE(consumer.has_message());
}

// Another process produces thousands of messages, half of the time with no
// spin, so both sides sleep in the kernel and wake each other.
TEST(MessageRing, AnotherProcessStreamsThousandsOfMessages) {
  constexpr int kMessages = 3000;
  SharedMemory memory(MessageRing::footprint(4096));
  MessageRing::create(memory.data(), 4096);
  const pid_t child = ::fork();
  if (child == 0) {
    MessageRing producer = MessageRing::attach(memory.data(), 4096);
    for (int i = 0; i < kMessages; ++i) {
      RingWait wait = producer_wait(memory, Clock::now() + 20s, {.spin = i % 2 == 0 ? 0us : 20us});
      if (!producer.send(7, pattern(static_cast<std::size_t>(i * 37 % 9000), i), wait)) ::_exit(1);
    }
    ::_exit(0);
  }
  MessageRing consumer = MessageRing::attach(memory.data(), 4096);
  int wrong = 0;
  for (int i = 0; i < kMessages; ++i) {
    RingWait wait = consumer_wait(memory, Clock::now() + 20s, {.spin = i % 3 == 0 ? 0us : 20us});
    const auto message = receive(consumer, wait);
    ASSERT_TRUE(message.has_value()) << "message " << i;
    wrong += message->second != pattern(static_cast<std::size_t>(i * 37 % 9000), i);
  }
  EXPECT_EQ(wrong, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(MessageRing, WaitsEndAtTheDeadlineAndSayWhetherAMessageBegan) {
  SharedMemory memory(MessageRing::footprint(kCapacity));
  MessageRing producer = MessageRing::create(memory.data(), kCapacity);
  MessageRing consumer = MessageRing::attach(memory.data(), kCapacity);

  auto start = Clock::now();
  RingWait empty = consumer_wait(memory, start + 100ms);
  EXPECT_FALSE(receive(consumer, empty).has_value());
  EXPECT_GE(Clock::now() - start, 100ms);
  EXPECT_FALSE(consumer.mid_message());

  // Nobody reads: a message four times the ring stops part way, and the
  // producer asked for a drain before it slept.
  int asked = 0;
  start = Clock::now();
  RingWait full = producer_wait(memory, start + 100ms);
  full.before_sleep = [&] { ++asked; };
  EXPECT_FALSE(producer.send(1, pattern(4 * kCapacity, 1), full));
  EXPECT_GE(Clock::now() - start, 100ms);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_TRUE(producer.mid_message());
  EXPECT_TRUE(producer.producer_stalled());
  EXPECT_GE(asked, 1);

  // The reader gets the part that arrived, then waits for the rest in vain.
  RingWait partial = consumer_wait(memory, Clock::now() + 100ms);
  EXPECT_FALSE(receive(consumer, partial).has_value());
  EXPECT_TRUE(consumer.mid_message());
}

TEST(MessageRing, AStopEndsAWaitAtOnce) {
  SharedMemory memory(MessageRing::footprint(kCapacity));
  MessageRing consumer = MessageRing::create(memory.data(), kCapacity);
  RingWait wait = consumer_wait(memory, Clock::now() + 30s);
  wait.stop = [] { return true; };
  const auto start = Clock::now();
  EXPECT_FALSE(receive(consumer, wait).has_value());
  EXPECT_LT(Clock::now() - start, 1s);
}

TEST(MessageRing, ACorruptHeaderIsAProtocolViolation) {
  SharedMemory memory(MessageRing::footprint(kCapacity));
  MessageRing producer = MessageRing::create(memory.data(), kCapacity);
  MessageRing consumer = MessageRing::attach(memory.data(), kCapacity);
  RingWait send = producer_wait(memory, Clock::now() + 1s);
  ASSERT_TRUE(producer.send(3, pattern(8, 0), send));
  memory.data()[256] ^= std::byte{0x40};  // the length's low byte, past the 256-byte control
  RingWait take = consumer_wait(memory, Clock::now() + 1s);
  try {
    receive(consumer, take);
    FAIL() << "a corrupt header was accepted";
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.kind(), ErrorKind::protocol_violation);
    EXPECT_NE(std::string(e.what()).find("check word"), std::string::npos) << e.what();
  }
}

// A counter moved by someone else (another process of this user writing the
// segment) must not send a copy past the ring: both sides check them.
TEST(MessageRing, CorruptCountersAreAProtocolViolationAndNothingOutsideIsWritten) {
  for (const std::size_t offset : {MessageRing::kReadOffset, MessageRing::kWrittenOffset}) {
    for (const std::uint64_t moved : {std::uint64_t{1} << 40, std::uint64_t{kCapacity + 8}}) {
      const std::size_t footprint = MessageRing::footprint(kCapacity);
      SharedMemory memory(footprint + 4096);
      std::memset(memory.data() + footprint, 0x5a, 4096);  // a guard after the ring
      MessageRing producer = MessageRing::create(memory.data(), kCapacity);
      MessageRing consumer = MessageRing::attach(memory.data(), kCapacity);
      RingWait send = producer_wait(memory, Clock::now() + 1s);
      send.site = [] { return ErrorSite{.operation = "send_bytes"}; };
      ASSERT_TRUE(producer.send(1, pattern(24, 0), send));
      auto& counter = *reinterpret_cast<std::atomic<std::uint64_t>*>(memory.data() + offset);
      counter.fetch_add(moved);
      const auto expect_violation = [&](auto&& call) {
        try {
          call();
          ADD_FAILURE() << "corrupt counters were accepted (offset " << offset << ")";
        } catch (const CollectiveError& e) {
          EXPECT_EQ(e.kind(), ErrorKind::protocol_violation) << e.what();
          EXPECT_NE(std::string(e.what()).find("counters are corrupt"), std::string::npos)
              << e.what();
        }
      };
      if (offset == MessageRing::kReadOffset) {  // the producer reads it
        expect_violation([&] { producer.send(2, pattern(4 * kCapacity, 1), send); });
      } else {  // the consumer reads it
        RingWait take = consumer_wait(memory, Clock::now() + 1s);
        expect_violation([&] {
          receive(consumer, take);
          receive(consumer, take);
        });
      }
      for (std::size_t i = 0; i < 4096; ++i) {
        ASSERT_EQ(memory.data()[footprint + i], std::byte{0x5a}) << "written past the ring";
      }
    }
  }
}

TEST(RingHeader, OnlyWhatMakeRingHeaderWritesPasses) {
  EXPECT_FALSE(ring_header_problem(make_ring_header(kMaxTag, kMaxRingMessage)));
  EXPECT_TRUE(ring_header_problem(make_ring_header(kMaxTag + 1, 0)));
  EXPECT_TRUE(ring_header_problem(make_ring_header(0, kMaxRingMessage + 1)));
  RingHeader header = make_ring_header(5, 100);
  header.length = 101;
  EXPECT_TRUE(ring_header_problem(header));
}

TEST(MessageRing, AttachingToSomethingElseIsRefused) {
  SharedMemory memory(MessageRing::footprint(1024));
  EXPECT_THROW(MessageRing::attach(memory.data(), 1024), std::invalid_argument);  // zeroes
  MessageRing::create(memory.data(), 1024);
  EXPECT_THROW(MessageRing::attach(memory.data(), 512), std::invalid_argument);
  EXPECT_THROW(MessageRing::create(memory.data(), 1000), std::invalid_argument);
}

}  // namespace
}  // namespace rlx::shm
