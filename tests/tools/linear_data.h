// Deterministic data for the linear-model tests: trainer t's batch at step s is a fixed set of
// samples (x, y) with y = x . w_true. Shared by the linear_trainer process and the tests, which
// recompute the same batches for a single-process reference. Test-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/hash.h"

namespace tessera::testing {

inline float Feature(int64_t step, int64_t trainer, int64_t sample, int64_t j) {
  uint64_t h = HashCombine(HashCombine(HashCombine(static_cast<uint64_t>(step), trainer), sample), j);
  return static_cast<float>(static_cast<int64_t>(h % 2001) - 1000) / 1000.0f;
}

inline float TrueWeight(int64_t j) { return std::sin(static_cast<float>(j)); }

inline float InitialWeight(int64_t j) { return 0.01f * static_cast<float>(j % 7); }

// Adds the gradient sum of 0.5 * (x.w - y)^2 over trainer t's batch at `step` to g; returns the
// loss sum.
inline double AddBatchGradient(int64_t step, int64_t trainer, int batch, const std::vector<float>& w,
                               std::vector<float>* g) {
  const int64_t d = static_cast<int64_t>(w.size());
  std::vector<float> x(d);
  double loss = 0;
  for (int i = 0; i < batch; ++i) {
    double pred = 0, y = 0;
    for (int64_t j = 0; j < d; ++j) {
      x[j] = Feature(step, trainer, i, j);
      pred += x[j] * w[j];
      y += x[j] * TrueWeight(j);
    }
    double err = pred - y;
    loss += 0.5 * err * err;
    for (int64_t j = 0; j < d; ++j) (*g)[j] += static_cast<float>(err * x[j]);
  }
  return loss;
}

// Mean squared error against the true weights on a held-out set.
inline double EvalLoss(const std::vector<float>& w) {
  std::vector<float> g(w.size());
  return AddBatchGradient(-1, -1, 200, w, &g) / 200;
}

}  // namespace tessera::testing
