// The soak: mixed collectives and point-to-point messages of random sizes,
// every result checked against what it must be, for a set time. It passes
// with zero mismatches and no growth of resident memory or open file
// descriptors between the end of the warm-up and the end of the run.
// Usage: rlxrun -n 4 soak [--seconds S]   (default 60)
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <rlx/rlx.h>
#include <unistd.h>

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMaxCount = std::size_t{1} << 20;  // elements per rank and call
constexpr std::size_t kSmallCount = 64;
constexpr int kStopCheckEvery = 8;  // iterations between agreeing to stop
constexpr int kOps = 10;

struct Usage {
  double rss_mib = 0;
  long fds = 0;
};

Usage usage_now() {
  Usage usage;
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  usage.rss_mib = static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
                  (1024.0 * 1024.0);
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++usage.fds;
  }
  return usage;
}

// Sizes spread over every scale: log-uniform from 0 to kMaxCount elements,
// or, every other call, to kSmallCount: runs of small calls are where ranks
// run ahead of each other (shared memory's call lines).
std::size_t random_count(std::mt19937_64& rng) {
  const std::size_t most = rng() % 2 == 0 ? kSmallCount : kMaxCount;
  std::uniform_real_distribution<double> exponent(0.0, std::log(double(most)));
  return static_cast<std::size_t>(std::exp(exponent(rng))) - 1;
}

class Soak {
 public:
  explicit Soak(rlx::Transport& group)
      : group_(group),
        n_(group.world_size()),
        me_(group.rank()),
        i32_(kMaxCount * static_cast<std::size_t>(n_)),
        f32_(kMaxCount),
        i64_in_(kMaxCount),
        i64_out_(kMaxCount * static_cast<std::size_t>(n_)),
        bytes_(kMaxCount) {}

  // One operation, chosen and sized the same way on every rank.
  void step(std::mt19937_64& rng, std::uint64_t iteration) {
    const std::size_t count = random_count(rng);
    const int op = static_cast<int>(rng() % kOps);
    const int root = static_cast<int>(rng() % static_cast<std::uint64_t>(n_));
    ++calls_[op];
    const auto salt = static_cast<std::int64_t>(iteration % 13);
    switch (op) {
      case 0:
        all_sum(count, salt);
        break;
      case 1:
        all_max(count, salt);
        break;
      case 2:
        all_gather(count, salt);
        break;
      case 3:
        reduce_scatter(count / static_cast<std::size_t>(n_) + 1, salt);
        break;
      case 4:
        group_.barrier();
        break;
      case 5:
        ring_exchange(count, salt);
        break;
      case 6:
        broadcast(count, root, salt);
        break;
      case 7:
        reduce(count, root, salt);
        break;
      case 8:
        gather(count, root, salt);
        break;
      default:
        scatter(count, root, salt);
        break;
    }
  }

  long mismatches() const { return mismatches_; }
  std::string calls() const {
    static const char* names[kOps] = {"all_sum", "all_max",   "all_gather", "reduce_scatter",
                                      "barrier", "send/recv", "broadcast",  "reduce",
                                      "gather",  "scatter"};
    std::string out;
    for (int i = 0; i < kOps; ++i)
      out += std::string(i ? ", " : "") + names[i] + " " + std::to_string(calls_[i]);
    return out;
  }

 private:
  void check(bool good) { mismatches_ += good ? 0 : 1; }

  void all_sum(std::size_t count, std::int64_t salt) {
    std::span<std::int32_t> v(i32_.data(), count);
    for (std::size_t j = 0; j < count; ++j)
      v[j] = (me_ + 1) * static_cast<std::int32_t>(j % 97 + salt);
    group_.all_sum(v);
    const std::int32_t ranks_sum = n_ * (n_ + 1) / 2;
    bool good = true;
    for (std::size_t j = 0; j < count; ++j)
      good &= v[j] == ranks_sum * static_cast<std::int32_t>(j % 97 + salt);
    check(good);
  }

  void all_max(std::size_t count, std::int64_t salt) {
    std::span<float> v(f32_.data(), count);
    auto value = [salt](int rank, std::size_t j) {
      return static_cast<float>(
          (static_cast<std::size_t>(rank) * 31 + j + static_cast<std::size_t>(salt)) % 101);
    };
    for (std::size_t j = 0; j < count; ++j) v[j] = value(me_, j);
    group_.all_reduce(v, rlx::ReduceOp::max);
    bool good = true;
    for (std::size_t j = 0; j < count; ++j) {
      float want = value(0, j);
      for (int r = 1; r < n_; ++r) want = std::max(want, value(r, j));
      good &= v[j] == want;
    }
    check(good);
  }

  void all_gather(std::size_t count, std::int64_t salt) {
    auto value = [salt](int rank, std::size_t j) {
      return rank * 1000000007LL + static_cast<std::int64_t>(j) + salt;
    };
    std::span<std::int64_t> in(i64_in_.data(), count);
    std::span<std::int64_t> out(i64_out_.data(), count * static_cast<std::size_t>(n_));
    for (std::size_t j = 0; j < count; ++j) in[j] = value(me_, j);
    group_.all_gather(std::span<const std::int64_t>(in), out);
    bool good = true;
    for (int r = 0; r < n_; ++r) {
      for (std::size_t j = 0; j < count; ++j)
        good &= out[static_cast<std::size_t>(r) * count + j] == value(r, j);
    }
    check(good);
  }

  void reduce_scatter(std::size_t block, std::int64_t salt) {
    const std::size_t total = block * static_cast<std::size_t>(n_);
    std::span<std::int32_t> in(i32_.data(), total);
    for (std::size_t j = 0; j < total; ++j)
      in[j] = (me_ + 1) * static_cast<std::int32_t>(j % 89 + salt);
    std::vector<std::int32_t>& out = reduce_out_;
    out.resize(kMaxCount);
    std::span<std::int32_t> mine(out.data(), block);
    group_.reduce_scatter(rlx::ConstElementSpan::of(std::span<const std::int32_t>(in)),
                          rlx::ElementSpan::of(mine), rlx::ReduceOp::sum);
    const std::int32_t ranks_sum = n_ * (n_ + 1) / 2;
    bool good = true;
    for (std::size_t j = 0; j < block; ++j) {
      const std::size_t global = static_cast<std::size_t>(me_) * block + j;
      good &= mine[j] == ranks_sum * static_cast<std::int32_t>(global % 89 + salt);
    }
    check(good);
  }

  // The rooted calls: small ones let ranks run ahead of each other on
  // shared memory (a root, or non-roots, return without waiting).
  void broadcast(std::size_t count, int root, std::int64_t salt) {
    std::span<std::int32_t> v(i32_.data(), count);
    auto value = [salt](std::size_t j) { return static_cast<std::int32_t>(j % 83) + salt; };
    for (std::size_t j = 0; j < count; ++j) v[j] = me_ == root ? value(j) : -1;
    group_.broadcast(v, root);
    bool good = true;
    for (std::size_t j = 0; j < count; ++j) good &= v[j] == value(j);
    check(good);
  }

  void reduce(std::size_t count, int root, std::int64_t salt) {
    std::span<std::int32_t> v(i32_.data(), count);
    for (std::size_t j = 0; j < count; ++j)
      v[j] = (me_ + 1) * static_cast<std::int32_t>(j % 79 + salt);
    group_.reduce(v, rlx::ReduceOp::sum, root);
    if (me_ != root) return;
    const std::int32_t ranks_sum = n_ * (n_ + 1) / 2;
    bool good = true;
    for (std::size_t j = 0; j < count; ++j)
      good &= v[j] == ranks_sum * static_cast<std::int32_t>(j % 79 + salt);
    check(good);
  }

  static std::int64_t personal(int rank, std::size_t j, std::int64_t salt) {
    return rank * 1000000009LL + static_cast<std::int64_t>(j) * 3 + salt;
  }

  void gather(std::size_t count, int root, std::int64_t salt) {
    std::span<std::int64_t> in(i64_in_.data(), count);
    std::span<std::int64_t> out(i64_out_.data(), count * static_cast<std::size_t>(n_));
    for (std::size_t j = 0; j < count; ++j) in[j] = personal(me_, j, salt);
    group_.gather(std::span<const std::int64_t>(in), out, root);
    if (me_ != root) return;
    bool good = true;
    for (int r = 0; r < n_; ++r) {
      for (std::size_t j = 0; j < count; ++j)
        good &= out[static_cast<std::size_t>(r) * count + j] == personal(r, j, salt);
    }
    check(good);
  }

  void scatter(std::size_t count, int root, std::int64_t salt) {
    std::span<std::int64_t> all(i64_out_.data(), count * static_cast<std::size_t>(n_));
    std::span<std::int64_t> mine(i64_in_.data(), count);
    if (me_ == root) {
      for (int r = 0; r < n_; ++r) {
        for (std::size_t j = 0; j < count; ++j)
          all[static_cast<std::size_t>(r) * count + j] = personal(r, j, salt);
      }
    }
    std::fill(mine.begin(), mine.end(), -1);
    group_.scatter(std::span<const std::int64_t>(all), mine, root);
    bool good = true;
    for (std::size_t j = 0; j < count; ++j) good &= mine[j] == personal(me_, j, salt);
    check(good);
  }

  void ring_exchange(std::size_t count, std::int64_t salt) {
    const int right = (me_ + 1) % n_, left = (me_ + n_ - 1) % n_;
    auto byte_of = [salt](int rank, std::size_t j) {
      return static_cast<std::byte>((rank * 7 + j + static_cast<std::size_t>(salt)) & 0xff);
    };
    for (std::size_t j = 0; j < count; ++j) bytes_[j] = byte_of(me_, j);
    group_.send_bytes(right, 5, std::span<const std::byte>(bytes_.data(), count));
    const std::vector<std::byte> got = group_.recv_bytes(left, 5);
    bool good = got.size() == count;
    for (std::size_t j = 0; good && j < count; ++j) good = got[j] == byte_of(left, j);
    check(good);
  }

  rlx::Transport& group_;
  const int n_, me_;
  std::vector<std::int32_t> i32_;
  std::vector<float> f32_;
  std::vector<std::int64_t> i64_in_, i64_out_;
  std::vector<std::byte> bytes_;
  std::vector<std::int32_t> reduce_out_;
  long mismatches_ = 0;
  long calls_[kOps] = {};
};

double parse_seconds(int argc, char** argv) {
  double seconds = 60;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--seconds") seconds = std::stod(argv[i + 1]);
  }
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const double seconds = parse_seconds(argc, argv);
    auto group = rlx::init();
    Soak soak(*group);
    std::mt19937_64 rng(20261123);  // the same stream on every rank
    const auto start = Clock::now();
    const auto warm_up_end = start + std::chrono::duration<double>(seconds / 10);
    const auto end = start + std::chrono::duration<double>(seconds);
    std::optional<Usage> after_warm_up;
    std::uint64_t iteration = 0;
    for (bool stop = false; !stop; ++iteration) {
      soak.step(rng, iteration);
      if (!after_warm_up && Clock::now() >= warm_up_end) after_warm_up = usage_now();
      if (iteration % kStopCheckEvery == 0) {
        // Every rank stops at the same iteration: the slowest one's clock decides.
        std::int32_t done = Clock::now() >= end ? 1 : 0;
        group->all_reduce(std::span(&done, 1), rlx::ReduceOp::min);
        stop = done == 1;
      }
    }
    if (!after_warm_up) after_warm_up = usage_now();
    const Usage final_usage = usage_now();
    const bool rss_grew = final_usage.rss_mib > after_warm_up->rss_mib * 1.10 + 16;
    const bool fds_grew = final_usage.fds > after_warm_up->fds;
    std::printf(
        "soak: rank %d of %d (%s): %llu iterations in %.0f s (%s): %ld mismatches; RSS %.1f -> "
        "%.1f MiB, fds %ld -> %ld after warm-up (%s)\n",
        group->rank(), group->world_size(), std::string(group->backend()).c_str(),
        static_cast<unsigned long long>(iteration), seconds, soak.calls().c_str(),
        soak.mismatches(), after_warm_up->rss_mib, final_usage.rss_mib, after_warm_up->fds,
        final_usage.fds, soak.mismatches() == 0 && !rss_grew && !fds_grew ? "ok" : "FAILED");
    return soak.mismatches() == 0 && !rss_grew && !fds_grew ? 0 : 1;
  } catch (const rlx::Error& error) {
    std::fprintf(stderr, "soak: %s\n", error.what());
    return 1;
  }
}
