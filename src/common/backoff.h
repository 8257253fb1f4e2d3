// Exponential backoff with jitter, for reconnect and retry loops. A pure class: it computes
// delays; the caller sleeps. Not thread-safe (one owner).
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace tessera {

struct BackoffOptions {
  std::chrono::milliseconds initial{50};  // first delay
  std::chrono::milliseconds max{2000};    // delays never exceed this
  double multiplier = 2.0;                // growth per failure
  double jitter = 0.2;                    // each delay is scaled by a factor in [1-jitter, 1+jitter]
};

class Backoff {
 public:
  explicit Backoff(BackoffOptions options = {}, uint64_t seed = std::random_device{}())
      : options_(options), rng_(seed) {}

  // The delay before the next attempt; grows after each call until Reset().
  std::chrono::milliseconds Next() {
    double base = static_cast<double>(options_.initial.count());
    for (int i = 0; i < attempts_ && base < options_.max.count(); ++i) base *= options_.multiplier;
    if (base > options_.max.count()) base = static_cast<double>(options_.max.count());
    ++attempts_;
    std::uniform_real_distribution<double> dist(1.0 - options_.jitter, 1.0 + options_.jitter);
    double d = base * dist(rng_);
    if (d > options_.max.count()) d = static_cast<double>(options_.max.count());
    return std::chrono::milliseconds(static_cast<int64_t>(d));
  }

  void Reset() { attempts_ = 0; }
  int attempts() const { return attempts_; }

 private:
  BackoffOptions options_;
  std::mt19937_64 rng_;
  int attempts_ = 0;
};

}  // namespace tessera
