// Exponential backoff with jitter, for reconnect and retry loops. A pure class: it computes
// delays; the caller sleeps. Not thread-safe (one owner).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
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
  // The random source is made on the first Next(): a Backoff that never waits (the common case
  // of a retry loop whose first attempt succeeds) costs nothing.
  explicit Backoff(BackoffOptions options = {}) : options_(options) {}
  Backoff(BackoffOptions options, uint64_t seed) : options_(options), seed_(seed) {}

  // The delay before the next attempt; grows after each call until Reset().
  std::chrono::milliseconds Next() {
    double base = static_cast<double>(options_.initial.count());
    for (int i = 0; i < attempts_ && base < options_.max.count(); ++i) base *= options_.multiplier;
    if (base > options_.max.count()) base = static_cast<double>(options_.max.count());
    ++attempts_;
    if (!rng_) rng_.emplace(seed_ ? *seed_ : std::random_device{}());
    std::uniform_real_distribution<double> dist(1.0 - options_.jitter, 1.0 + options_.jitter);
    double d = base * dist(*rng_);
    if (d > options_.max.count()) d = static_cast<double>(options_.max.count());
    return std::chrono::milliseconds(static_cast<int64_t>(d));
  }

  void Reset() { attempts_ = 0; }
  int attempts() const { return attempts_; }

 private:
  BackoffOptions options_;
  std::optional<uint64_t> seed_;
  std::optional<std::mt19937_64> rng_;
  int attempts_ = 0;
};

}  // namespace tessera
