// What every sweep driver (rlx-bench, and the Open MPI and Gloo drivers in
// bench/peers) shares: the nccl-tests conventions, the size list, the
// iteration policy and the output format, so bench/compare can read them all.
//
//   size  count  type  redop  | time(us)  min(us)  algbw  busbw  #wrong
//
// time is the slowest rank's mean per iteration (what the job waits for);
// min(us) the fastest rank's. GB = 1e9 bytes. algbw = size / time. busbw =
// algbw x 2(n-1)/n for all_sum, x (n-1)/n for all_gather (whose size is the
// gathered output) and all_to_all (size: one rank's whole input), x 1 for
// broadcast (from rank 0), reduce (a sum to rank 0), gather (to rank 0; size:
// the gathered output, x (n-1)/n) and sendrecv (time is half a round trip);
// barrier reports time only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace rlx::bench {

enum class Op { all_sum, all_gather, barrier, sendrecv, broadcast, all_to_all, reduce, gather };

inline const char* name_of(Op op) {
  switch (op) {
    case Op::all_sum:
      return "all_sum";
    case Op::all_gather:
      return "all_gather";
    case Op::barrier:
      return "barrier";
    case Op::sendrecv:
      return "sendrecv";
    case Op::broadcast:
      return "broadcast";
    case Op::all_to_all:
      return "all_to_all";
    case Op::reduce:
      return "reduce";
    case Op::gather:
      return "gather";
  }
  return "?";
}

struct SweepOptions {
  Op op = Op::all_sum;
  std::size_t min_bytes = 4;
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 4;
  double seconds_per_size = 0.2;  // timing budget per size (iterations adapt)
  int min_iters = 5;
  int max_iters = 2000;
  int warmup = 3;
  bool csv = false;
  // New input before every timed call (untimed), and the call's result
  // checked after it: no buffer stays warm in the caches from the call
  // before, and a stale result counts as wrong (#wrong).
  bool vary_data = false;
  std::string label;  // the system's name in the output, e.g. "rlx-tcp"
};

// Parses "4", "64K", "16M", "1G".
inline std::size_t parse_size(std::string_view text) {
  std::size_t scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'K':
      case 'k':
        scale = std::size_t{1} << 10;
        break;
      case 'M':
      case 'm':
        scale = std::size_t{1} << 20;
        break;
      case 'G':
      case 'g':
        scale = std::size_t{1} << 30;
        break;
    }
    if (scale != 1) text.remove_suffix(1);
  }
  return std::strtoull(std::string(text).c_str(), nullptr, 10) * scale;
}

inline Op parse_op(std::string_view text) {
  for (Op op : {Op::all_sum, Op::all_gather, Op::barrier, Op::sendrecv, Op::broadcast,
                Op::all_to_all, Op::reduce, Op::gather}) {
    if (text == name_of(op)) return op;
  }
  std::fprintf(stderr,
               "unknown op '%.*s': all_sum, all_gather, barrier, sendrecv, broadcast, all_to_all, "
               "reduce, gather\n",
               static_cast<int>(text.size()), text.data());
  std::exit(2);
}

// --op, --min-bytes/-b, --max-bytes/-e, --factor/-f, --seconds, --iters, --warmup, --csv,
// --vary-data, --label.
inline SweepOptions parse_sweep_options(int argc, char** argv, const char* default_label) {
  SweepOptions o;
  o.label = default_label;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--op") {
      o.op = parse_op(value());
    } else if (arg == "--min-bytes" || arg == "-b") {
      o.min_bytes = parse_size(value());
    } else if (arg == "--max-bytes" || arg == "-e") {
      o.max_bytes = parse_size(value());
    } else if (arg == "--factor" || arg == "-f") {
      o.factor = std::max<std::size_t>(2, parse_size(value()));
    } else if (arg == "--seconds") {
      o.seconds_per_size = std::atof(std::string(value()).c_str());
    } else if (arg == "--iters") {
      o.min_iters = o.max_iters = std::atoi(std::string(value()).c_str());
    } else if (arg == "--warmup") {
      o.warmup = std::atoi(std::string(value()).c_str());
    } else if (arg == "--csv") {
      o.csv = true;
    } else if (arg == "--vary-data") {
      o.vary_data = true;
    } else if (arg == "--label") {
      o.label = value();
    } else {
      std::fprintf(stderr,
                   "usage: %s [--op "
                   "all_sum|all_gather|barrier|sendrecv|broadcast|all_to_all|reduce|gather] [-b "
                   "MIN] [-e MAX] "
                   "[-f FACTOR] [--seconds S] [--iters N] [--warmup N] [--csv] [--vary-data] "
                   "[--label L]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  return o;
}

inline std::vector<std::size_t> sweep_sizes(const SweepOptions& o) {
  if (o.op == Op::barrier) return {0};
  std::vector<std::size_t> sizes;
  for (std::size_t s = std::max<std::size_t>(o.min_bytes, 4); s <= o.max_bytes; s *= o.factor) {
    sizes.push_back(s);
  }
  return sizes;
}

inline double bus_factor(Op op, int n) {
  switch (op) {
    case Op::all_sum:
      return 2.0 * (n - 1) / n;
    case Op::all_gather:
    case Op::all_to_all:
    case Op::gather:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

// Iterations that fit the per-size budget, given one iteration's measured time.
inline int iterations_for(const SweepOptions& o, double seconds_per_iteration) {
  const double fit = o.seconds_per_size / std::max(seconds_per_iteration, 1e-7);
  return static_cast<int>(std::clamp<double>(fit, o.min_iters, o.max_iters));
}

inline void print_header(const SweepOptions& o, int ranks) {
  if (o.csv) {
    std::printf("system,op,ranks,size,count,type,time_us,min_time_us,algbw_gbs,busbw_gbs,wrong\n");
    return;
  }
  std::printf("# %s %s, %d ranks%s\n", o.label.c_str(), name_of(o.op), ranks,
              o.vary_data ? ", new data every call" : "");
  std::printf("#%12s %12s %6s %6s | %10s %10s %8s %8s %7s\n", "size", "count", "type", "redop",
              "time(us)", "min(us)", "algbw", "busbw", "#wrong");
}

// Seconds per iteration, across the ranks.
struct RankTimes {
  double slowest = 0, fastest = 0;
};

inline void print_row(const SweepOptions& o, int ranks, std::size_t size, const char* type,
                      RankTimes times, long long wrong) {
  const double seconds = times.slowest;
  const std::size_t element = std::strcmp(type, "f32") == 0 ? 4 : 1;
  const double algbw = seconds > 0 && size > 0 ? static_cast<double>(size) / seconds / 1e9 : 0.0;
  const double busbw = algbw * bus_factor(o.op, ranks);
  if (o.csv) {
    std::printf("%s,%s,%d,%zu,%zu,%s,%.3f,%.3f,%.4f,%.4f,%lld\n", o.label.c_str(), name_of(o.op),
                ranks, size, size / element, type, seconds * 1e6, times.fastest * 1e6, algbw, busbw,
                wrong);
  } else {
    const std::string wrong_text = wrong < 0 ? "-" : std::to_string(wrong);
    std::printf(" %12zu %12zu %6s %6s | %10.2f %10.2f %8.3f %8.3f %7s\n", size, size / element,
                type, o.op == Op::all_sum ? "sum" : "-", seconds * 1e6, times.fastest * 1e6, algbw,
                busbw, wrong_text.c_str());
  }
  std::fflush(stdout);
}

}  // namespace rlx::bench
