// Zipf(s) ranks over [0, n) for any n (100M ids need no table): Hormann and Derflinger's
// rejection-inversion sampler ("Rejection-inversion to generate variates from monotone discrete
// distributions", 1996), as Apache Commons' RejectionInversionZipfSampler lays it out. Rank 0 is
// the most frequent. Shared by the sparse benchmarks; feature ids are the ranks hashed.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/hash.h"

namespace tessera::bench {

class ZipfSampler {
 public:
  ZipfSampler(uint64_t n, double s)
      : n_(static_cast<double>(n)),
        s_(s),
        h_x1_(HIntegral(1.5) - 1),
        h_n_(HIntegral(n_ + 0.5)),
        cut_(2 - HIntegralInverse(HIntegral(2.5) - H(2))) {}

  uint64_t operator()(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> uniform(0, 1);
    for (;;) {
      const double u = h_n_ + uniform(rng) * (h_x1_ - h_n_);
      const double x = HIntegralInverse(u);
      double k = std::floor(x + 0.5);
      if (k < 1) k = 1;
      if (k > n_) k = n_;
      if (k - x <= cut_ || u >= HIntegral(k + 0.5) - H(k)) return static_cast<uint64_t>(k) - 1;
    }
  }

 private:
  // (exp(x) - 1) / x and log(1 + x) / x, exact near 0.
  static double Expm1Over(double x) { return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1 + x / 2 + x * x / 6; }
  static double Log1pOver(double x) { return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1 - x / 2 + x * x / 3; }
  double H(double x) const { return std::exp(-s_ * std::log(x)); }
  double HIntegral(double x) const {
    const double lx = std::log(x);
    return Expm1Over((1 - s_) * lx) * lx;
  }
  double HIntegralInverse(double x) const {
    double t = x * (1 - s_);
    if (t < -1) t = -1;  // rounding at the very edge
    return std::exp(Log1pOver(t) * x);
  }

  double n_, s_, h_x1_, h_n_, cut_;
};

// `count` feature ids: Zipf(s) ranks over [0, n), hashed.
inline std::vector<uint64_t> ZipfKeys(uint64_t n, double s, size_t count, uint64_t seed) {
  ZipfSampler zipf(n, s);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys(count);
  for (auto& k : keys) k = Mix64(zipf(rng));
  return keys;
}

}  // namespace tessera::bench
