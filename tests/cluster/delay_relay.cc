// A transparent TCP relay that delays every byte, with jitter: the delay and
// jitter this kernel's missing netem would give. nftables redirects a test
// host's TCP connections to it (network_faults.sh, case `delayed`); it finds
// each connection's real destination with SO_ORIGINAL_DST, connects there
// with a firewall mark (so its own connection is not redirected again), and
// forwards each direction's bytes in order, each chunk released
// DELAY + uniform(0, JITTER) ms after it arrived (never before the chunk
// ahead of it, as TCP keeps order).
//
//   delay_relay PORT DELAY_MS JITTER_MS MARK      (milliseconds may be fractional: 0.1)
//
// Prints one line per relayed connection. A test fixture: it runs until
// killed, and a direction stops at the first end of file or error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kChunkBytes = 64 * 1024;
constexpr std::size_t kMaxQueuedBytes = 16 << 20;  // then the reader waits: TCP's backpressure

struct Settings {
  std::chrono::microseconds delay, jitter;
  int mark;
};

// Both sockets of one relayed connection; closed when both directions are done.
struct Pair {
  Pair(int client_fd, int server_fd) : client(client_fd), server(server_fd) {}
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;
  int client, server;
  ~Pair() {
    ::close(client);
    ::close(server);
  }
  void abort() const {
    ::shutdown(client, SHUT_RDWR);
    ::shutdown(server, SHUT_RDWR);
  }
};

struct Chunk {
  Clock::time_point release;
  std::vector<char> bytes;  // empty: end of file
};

// One direction: a reader that stamps chunks, a writer that releases them on time.
class Direction {
 public:
  Direction(std::shared_ptr<Pair> pair, int from, int to, const Settings& settings)
      : pair_(std::move(pair)),
        from_(from),
        to_(to),
        settings_(settings),
        random_(std::random_device{}()) {}

  static void start(std::shared_ptr<Pair> pair, int from, int to, const Settings& settings) {
    auto direction = std::make_shared<Direction>(std::move(pair), from, to, settings);
    std::thread([direction] { direction->read(); }).detach();
    std::thread([direction] { direction->write(); }).detach();
  }

 private:
  void read() {
    for (;;) {
      std::vector<char> bytes(kChunkBytes);
      const ssize_t n = ::recv(from_, bytes.data(), bytes.size(), 0);
      bytes.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
      const bool end = n <= 0;
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return queued_bytes_ < kMaxQueuedBytes || stopped_; });
      if (stopped_) return;
      queued_bytes_ += bytes.size();
      queue_.push_back({release_time(), std::move(bytes)});
      changed_.notify_all();
      if (end) return;
    }
  }

  Clock::time_point release_time() {
    std::uniform_int_distribution<long long> extra(0, settings_.jitter.count());
    last_release_ = std::max(
        last_release_, Clock::now() + settings_.delay + std::chrono::microseconds(extra(random_)));
    return last_release_;
  }

  void write() {
    for (;;) {
      Chunk chunk;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return !queue_.empty(); });
        const auto release = queue_.front().release;
        lock.unlock();
        std::this_thread::sleep_until(release);
        lock.lock();
        chunk = std::move(queue_.front());
        queue_.pop_front();
        queued_bytes_ -= chunk.bytes.size();
        changed_.notify_all();
      }
      if (chunk.bytes.empty()) {
        ::shutdown(to_, SHUT_WR);
        return;
      }
      if (!send_all(chunk.bytes)) {
        stop();
        return;
      }
    }
  }

  bool send_all(const std::vector<char>& bytes) const {
    for (std::size_t sent = 0; sent < bytes.size();) {
      const ssize_t n = ::send(to_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    pair_->abort();
    changed_.notify_all();
  }

  std::shared_ptr<Pair> pair_;
  int from_, to_;
  Settings settings_;
  std::mt19937_64 random_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Chunk> queue_;
  std::size_t queued_bytes_ = 0;
  bool stopped_ = false;
  Clock::time_point last_release_{};
};

std::string describe(const sockaddr_in& address) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
}

void relay(int client, const Settings& settings) {
  sockaddr_in destination{}, source{};
  socklen_t length = sizeof destination;
  socklen_t source_length = sizeof source;
  ::getpeername(client, reinterpret_cast<sockaddr*>(&source), &source_length);
  if (::getsockopt(client, SOL_IP, SO_ORIGINAL_DST, &destination, &length) != 0) {
    std::perror("delay_relay: SO_ORIGINAL_DST (was this connection redirected here?)");
    ::close(client);
    return;
  }
  const int server = ::socket(AF_INET, SOCK_STREAM, 0);
  const timeval connect_within{10, 0};
  ::setsockopt(server, SOL_SOCKET, SO_SNDTIMEO, &connect_within, sizeof connect_within);
  if (::setsockopt(server, SOL_SOCKET, SO_MARK, &settings.mark, sizeof settings.mark) != 0 ||
      ::connect(server, reinterpret_cast<sockaddr*>(&destination), sizeof destination) != 0) {
    std::fprintf(stderr, "delay_relay: %s -> %s: %s\n", describe(source).c_str(),
                 describe(destination).c_str(), std::strerror(errno));
    ::close(server);
    ::close(client);
    return;
  }
  // Chunks leave when their time comes, not when Nagle's algorithm lets them.
  const int on = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  ::setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  std::printf("delay_relay: %s -> %s\n", describe(source).c_str(), describe(destination).c_str());
  std::fflush(stdout);
  auto pair = std::make_shared<Pair>(client, server);
  Direction::start(pair, client, server, settings);
  Direction::start(pair, server, client, settings);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: delay_relay PORT DELAY_MS JITTER_MS MARK\n");
    return 2;
  }
  auto microseconds = [](const char* ms) {
    return std::chrono::microseconds(std::llround(std::atof(ms) * 1000));
  };
  const Settings settings{microseconds(argv[2]), microseconds(argv[3]), std::atoi(argv[4])};
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  const int on = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(std::atoi(argv[1])));
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener, 128) != 0) {
    std::perror("delay_relay: listen");
    return 1;
  }
  std::printf("delay_relay: listening on port %s, delay %s ms + up to %s ms of jitter\n", argv[1],
              argv[2], argv[3]);
  std::fflush(stdout);
  for (;;) {
    const int client = ::accept(listener, nullptr, nullptr);
    if (client >= 0) relay(client, settings);
  }
}
