// The sweep loop every driver runs, over any communicator with this shape:
//
//   int rank(); int size();
//   void all_sum(float* data, std::size_t count);              // in place
//   void all_gather(const float* in, float* out, std::size_t count_per_rank);
//   void barrier();
//   void send(int peer, const std::byte* data, std::size_t bytes);
//   void recv(int peer, std::byte* data, std::size_t bytes);
//   double max(double value);                                  // across ranks
// and, where the system has them (else those ops print no rows):
//   void broadcast(float* data, std::size_t count, int root);
//   void all_to_all(const float* in, float* out, std::size_t count_per_block);
//   void reduce(float* data, std::size_t count, int root);      // sum, in place
//   void gather(const float* in, float* out, std::size_t count_per_rank, int root);
//
// Per size: one verified run (#wrong), a warm-up, a probe that sizes the
// iteration count to the time budget (agreed across ranks), then the timed
// loop. Reported time is the slowest rank's mean per iteration. Buffers are
// allocated once, at the largest size, and reused. With --vary-data every
// timed call gets new input first (written outside the timing), and its
// result's ends are checked after it (a stale one counts in #wrong).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "bench/sweep.h"

namespace rlx::bench {

template <class Comm>
class Sweep {
  // A driver that only moves bytes (the TCP ceiling) says so with
  // `static constexpr bool kMovesOnly = true;` and is not verified.
  static constexpr bool kComputes = !requires { Comm::kMovesOnly; };
  static constexpr bool kBroadcasts = requires(Comm & c, float* f) {
    c.broadcast(f, std::size_t{}, 0);
  };
  static constexpr bool kExchanges = requires(Comm & c, float* f) {
    c.all_to_all(f, f, std::size_t{});
  };
  static constexpr bool kRooted = requires(Comm & c, float* f) {
    c.reduce(f, std::size_t{}, 0);
    c.gather(f, f, std::size_t{}, 0);
  };

 public:
  Sweep(Comm& comm, const SweepOptions& options) : comm_(comm), o_(options) {}

  void run() {
    const std::size_t largest = o_.max_bytes / sizeof(float) + 1;
    data_.assign(largest, 0.0f);
    out_.assign(largest, 0.0f);
    if (comm_.rank() == 0) print_header(o_, comm_.size());
    for (std::size_t size : sweep_sizes(o_)) {
      if (!applicable(size)) continue;
      const long long wrong =
          kComputes ? static_cast<long long>(comm_.max(static_cast<double>(verify(size)))) : -1;
      for (int i = 0; i < o_.warmup; ++i) once(size);
      stale_ = 0;
      const int iters = iterations_for(o_, comm_.max(time_iterations(size, 1)));
      const double mine = time_iterations(size, iters);
      const RankTimes times{.slowest = comm_.max(mine), .fastest = -comm_.max(-mine)};
      const long long stale =
          kComputes && o_.vary_data ? static_cast<long long>(comm_.max(double(stale_))) : 0;
      if (comm_.rank() == 0) print_row(o_, comm_.size(), size, type(), times, wrong + stale);
    }
  }

 private:
  bool applicable(std::size_t size) const {
    const auto n = static_cast<std::size_t>(comm_.size());
    if (o_.op == Op::broadcast && !kBroadcasts) return false;
    if (o_.op == Op::all_to_all && !kExchanges) return false;
    if ((o_.op == Op::reduce || o_.op == Op::gather) && !kRooted) return false;
    if (o_.op == Op::all_gather || o_.op == Op::all_to_all || o_.op == Op::gather) {
      return size % (n * sizeof(float)) == 0;
    }
    if (o_.op == Op::sendrecv) return comm_.size() >= 2;
    return o_.op == Op::barrier || size % sizeof(float) == 0;
  }

  const char* type() const { return o_.op == Op::barrier || o_.op == Op::sendrecv ? "u8" : "f32"; }

  std::size_t per_rank(std::size_t size) const {
    return size / sizeof(float) / static_cast<std::size_t>(comm_.size());
  }

  void once(std::size_t size) {
    switch (o_.op) {
      case Op::all_sum:
        return comm_.all_sum(data_.data(), size / sizeof(float));
      case Op::all_gather:
        return comm_.all_gather(data_.data(), out_.data(), per_rank(size));
      case Op::barrier:
        return comm_.barrier();
      case Op::sendrecv:
        return ping_pong(size);
      case Op::broadcast:
        if constexpr (kBroadcasts) comm_.broadcast(data_.data(), size / sizeof(float), 0);
        return;
      case Op::all_to_all:
        if constexpr (kExchanges) comm_.all_to_all(data_.data(), out_.data(), per_rank(size));
        return;
      case Op::reduce:
        if constexpr (kRooted) comm_.reduce(data_.data(), size / sizeof(float), 0);
        return;
      case Op::gather:
        if constexpr (kRooted) comm_.gather(data_.data(), out_.data(), per_rank(size), 0);
        return;
    }
  }

  // Ranks 0 and 1 bounce a message; the others wait at the next agreement.
  // Sent from one buffer and received into another, as applications do:
  // receiving into the buffer just sent makes Open MPI's shared memory
  // slower around 256 KiB (docs/BENCHMARKS.md), which would flatter whoever
  // it is compared with.
  void ping_pong(std::size_t size) {
    const auto* outgoing = reinterpret_cast<const std::byte*>(data_.data());
    auto* incoming = reinterpret_cast<std::byte*>(out_.data());
    if (comm_.rank() == 0) {
      comm_.send(1, outgoing, size);
      comm_.recv(1, incoming, size);
    } else if (comm_.rank() == 1) {
      comm_.recv(0, incoming, size);
      comm_.send(0, outgoing, size);
    }
  }

  std::size_t verify(std::size_t size) {
    const int n = comm_.size(), r = comm_.rank();
    std::size_t wrong = 0;
    if (o_.op == Op::all_sum) {
      const std::size_t count = size / sizeof(float);
      std::fill_n(data_.begin(), count, static_cast<float>(r + 1));
      comm_.all_sum(data_.data(), count);
      const float want = static_cast<float>(n * (n + 1) / 2);
      for (std::size_t i = 0; i < count; ++i) wrong += data_[i] != want;
    } else if (o_.op == Op::all_gather) {
      const std::size_t count = per_rank(size);
      std::fill_n(data_.begin(), count, static_cast<float>(r));
      comm_.all_gather(data_.data(), out_.data(), count);
      for (std::size_t i = 0; i < count * static_cast<std::size_t>(n); ++i) {
        wrong += out_[i] != static_cast<float>(i / count);
      }
    } else if (o_.op == Op::broadcast) {
      const std::size_t count = size / sizeof(float);
      std::fill_n(data_.begin(), count, static_cast<float>(r + 1));
      once(size);
      for (std::size_t i = 0; i < count; ++i) wrong += data_[i] != 1.0f;
    } else if (o_.op == Op::reduce) {
      // Rank 0 gets the sum; the others keep their input.
      const std::size_t count = size / sizeof(float);
      std::fill_n(data_.begin(), count, static_cast<float>(r + 1));
      once(size);
      const float want = r == 0 ? static_cast<float>(n * (n + 1) / 2) : static_cast<float>(r + 1);
      for (std::size_t i = 0; i < count; ++i) wrong += data_[i] != want;
    } else if (o_.op == Op::gather) {
      const std::size_t count = per_rank(size);
      std::fill_n(data_.begin(), count, static_cast<float>(r));
      once(size);
      for (std::size_t i = 0; r == 0 && i < count * static_cast<std::size_t>(n); ++i) {
        wrong += out_[i] != static_cast<float>(i / count);
      }
    } else if (o_.op == Op::all_to_all) {
      // Block j of rank r holds r * n + j; block i received holds i * n + r.
      const std::size_t count = per_rank(size);
      for (std::size_t i = 0; i < count * static_cast<std::size_t>(n); ++i) {
        data_[i] = static_cast<float>(r * n + static_cast<int>(i / count));
      }
      once(size);
      for (std::size_t i = 0; i < count * static_cast<std::size_t>(n); ++i) {
        wrong += out_[i] != static_cast<float>(static_cast<int>(i / count) * n + r);
      }
    } else {
      once(size);
    }
    std::fill(data_.begin(), data_.end(), 0.0f);  // zeros: no overflow in the timed loop
    return wrong;
  }

  double time_iterations(std::size_t size, int iters) {
    if (o_.vary_data) return time_with_new_inputs(size, iters);
    comm_.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) once(size);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    // Half a round trip per ping-pong.
    return elapsed.count() / iters / (o_.op == Op::sendrecv ? 2.0 : 1.0);
  }

  // Only the calls are timed: each rank's writes of the next input happen
  // between them, as an application's compute would.
  double time_with_new_inputs(std::size_t size, int iters) {
    comm_.barrier();
    std::chrono::duration<double> in_calls{0};
    for (int i = 0; i < iters; ++i) {
      const int call = calls_++;
      write_input(size, call);
      const auto start = std::chrono::steady_clock::now();
      once(size);
      in_calls += std::chrono::steady_clock::now() - start;
      if constexpr (kComputes) stale_ += stale_ends(size, call);
    }
    return in_calls.count() / iters / (o_.op == Op::sendrecv ? 2.0 : 1.0);
  }

  // Call `call`'s value from rank `k` (of an all_to_all: for block k = r * n
  // + j, distinct up to 64 ranks): whole numbers whose sums over 64 ranks
  // are exact in float (below 2^24).
  static float stamp(int call, int k) { return static_cast<float>((call % 64) * 4096 + k + 1); }
  static unsigned char byte_stamp(int call, int rank) {
    return static_cast<unsigned char>((call * 2 + rank) % 251 + 1);
  }

  void write_input(std::size_t size, int call) {
    const int n = comm_.size(), r = comm_.rank();
    const std::size_t block = per_rank(size);
    switch (o_.op) {
      case Op::barrier:
        return;
      case Op::sendrecv:
        std::memset(data_.data(), byte_stamp(call, r), size);
        return;
      case Op::all_to_all:
        for (int j = 0; j < n; ++j) {
          std::fill_n(data_.begin() + static_cast<std::ptrdiff_t>(block) * j, block,
                      stamp(call, r * n + j));
        }
        return;
      case Op::all_gather:
      case Op::gather:
        std::fill_n(data_.begin(), block, stamp(call, r));
        return;
      default:
        std::fill_n(data_.begin(), size / sizeof(float), stamp(call, r));
        return;
    }
  }

  // How many of the result's first and last elements (of each block) are
  // not call `call`'s.
  std::size_t stale_ends(std::size_t size, int call) const {
    const int n = comm_.size(), r = comm_.rank();
    const std::size_t count = size / sizeof(float), block = per_rank(size);
    const auto ends_differ = [](const float* first, std::size_t length, float want) {
      return std::size_t{first[0] != want} + std::size_t{first[length - 1] != want};
    };
    const auto blocks_differ = [&](int source_of_block_0, int step) {
      std::size_t stale = 0;
      for (int j = 0; j < n; ++j) {
        stale += ends_differ(out_.data() + block * static_cast<std::size_t>(j), block,
                             stamp(call, source_of_block_0 + step * j));
      }
      return stale;
    };
    float sum = 0;
    for (int k = 0; k < n; ++k) sum += stamp(call, k);
    switch (o_.op) {
      case Op::all_sum:
        return ends_differ(data_.data(), count, sum);
      case Op::reduce:
        return ends_differ(data_.data(), count, r == 0 ? sum : stamp(call, r));
      case Op::broadcast:
        return ends_differ(data_.data(), count, stamp(call, 0));
      case Op::all_gather:
        return blocks_differ(0, 1);
      case Op::gather:
        return r == 0 ? blocks_differ(0, 1) : 0;
      case Op::all_to_all:
        return blocks_differ(r, n);
      case Op::sendrecv: {
        if (r > 1) return 0;
        const auto* in = reinterpret_cast<const unsigned char*>(out_.data());
        const unsigned char want = byte_stamp(call, 1 - r);
        return std::size_t{in[0] != want} + std::size_t{in[size - 1] != want};
      }
      case Op::barrier:
        return 0;
    }
    return 0;
  }

  Comm& comm_;
  SweepOptions o_;
  std::vector<float> data_, out_;
  int calls_ = 0;          // --vary-data: calls made, each with its own input
  std::size_t stale_ = 0;  // --vary-data: this size's results that were not their call's
};

}  // namespace rlx::bench
