// cost-model: fits the all-reduce cost model (rlx/collectives/cost_model.h) to
// measured times and predicts with it. bench/scaling drives it; the formulas
// live only in rlx/collectives/cost_model.cc.
//
//   cost-model fit < rows          rows: "algorithm ranks bytes seconds" per line
//                                  (algorithm: ring | recursive_doubling | shm);
//                                  prints "alpha beta gamma" (s, s/B, s/B)
//   cost-model predict ALPHA BETA GAMMA RANKS BYTES
//                                  prints "ring_seconds doubling_seconds crossover_bytes"
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "rlx/collectives/cost_model.h"

namespace {

using rlx::AlgorithmWork;
using Row = std::array<double, 4>;  // steps, bytes sent, bytes reduced, seconds

AlgorithmWork work_of(const std::string& algorithm, int ranks, double bytes) {
  if (algorithm == "ring") return rlx::all_reduce_ring_work(ranks, bytes);
  if (algorithm == "recursive_doubling") {
    return rlx::all_reduce_recursive_doubling_work(ranks, bytes);
  }
  if (algorithm == "shm") return rlx::all_reduce_shm_work(ranks, bytes);
  std::fprintf(stderr, "cost-model: unknown algorithm '%s'\n", algorithm.c_str());
  std::exit(2);
}

// Solves the 3x3 system a x = b by Gaussian elimination with partial pivoting.
std::array<double, 3> solve(std::array<std::array<double, 3>, 3> a, std::array<double, 3> b) {
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::fabs(a[r][col]) > std::fabs(a[pivot][col])) pivot = r;
    }
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    for (int r = col + 1; r < 3; ++r) {
      const double f = a[r][col] / a[col][col];
      for (int c = col; c < 3; ++c) a[r][c] -= f * a[col][c];
      b[r] -= f * b[col];
    }
  }
  std::array<double, 3> x{};
  for (int r = 2; r >= 0; --r) {
    double sum = b[r];
    for (int c = r + 1; c < 3; ++c) sum -= a[r][c] * x[c];
    x[r] = sum / a[r][r];
  }
  return x;
}

// Least squares on relative error (each row divided by its measured time),
// so the microsecond rows weigh as much as the second-long ones. A constant
// cannot be negative: of the fits over every subset of the constants (the
// rest held at zero), the best one with no negative constant wins.
std::array<double, 3> fit_rows(const std::vector<Row>& rows) {
  std::array<double, 3> best{};
  double best_residual = std::numeric_limits<double>::infinity();
  for (int subset = 1; subset < 8; ++subset) {
    std::array<std::array<double, 3>, 3> normal{};
    std::array<double, 3> rhs{};
    for (const Row& row : rows) {
      for (int i = 0; i < 3; ++i) {
        for (int j = 0; j < 3; ++j) normal[i][j] += row[i] * row[j];
        rhs[i] += row[i] * row[3];
      }
    }
    for (int i = 0; i < 3; ++i) {
      if (subset & (1 << i)) continue;
      normal[i] = {};
      for (auto& r : normal) r[i] = 0;
      normal[i][i] = 1;
      rhs[i] = 0;
    }
    const auto x = solve(normal, rhs);
    if (std::any_of(x.begin(), x.end(), [](double v) { return !(v >= 0); })) continue;
    double residual = 0;
    for (const Row& row : rows) {
      const double e = row[0] * x[0] + row[1] * x[1] + row[2] * x[2] - row[3];
      residual += e * e;
    }
    if (residual < best_residual) {
      best_residual = residual;
      best = x;
    }
  }
  return best;
}

int fit() {
  std::vector<Row> rows;
  std::string algorithm;
  int ranks = 0;
  double bytes = 0, seconds = 0;
  while (std::cin >> algorithm >> ranks >> bytes >> seconds) {
    const AlgorithmWork w = work_of(algorithm, ranks, bytes);
    rows.push_back({w.steps / seconds, w.bytes_sent / seconds, w.bytes_reduced / seconds, 1.0});
  }
  if (rows.size() < 3) {
    std::fprintf(stderr, "cost-model fit: need at least 3 rows, got %zu\n", rows.size());
    return 2;
  }
  const auto x = fit_rows(rows);
  std::printf("%.6g %.6g %.6g\n", x[0], x[1], x[2]);
  return 0;
}

int predict(char** argv) {
  const rlx::CostModel cost{std::atof(argv[0]), std::atof(argv[1]), std::atof(argv[2])};
  const int ranks = std::atoi(argv[3]);
  const double bytes = std::atof(argv[4]);
  std::printf("%.6g %.6g %zu\n", rlx::all_reduce_ring_work(ranks, bytes).seconds(cost),
              rlx::all_reduce_recursive_doubling_work(ranks, bytes).seconds(cost),
              rlx::all_reduce_crossover_bytes(cost, ranks));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "fit" && argc == 2) return fit();
  if (command == "predict" && argc == 7) return predict(argv + 2);
  std::fprintf(stderr,
               "usage: cost-model fit < rows\n"
               "       cost-model predict ALPHA BETA GAMMA RANKS BYTES\n");
  return 2;
}
