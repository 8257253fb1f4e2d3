// Evaluation helpers shared by models and the click-log generator. Pure; thread-safe.
#pragma once

#include <cmath>
#include <vector>

namespace tessera::models {

// Area under the ROC curve of `scores` for binary `labels` (ties count half). 0.5 if one class
// is missing.
double Auc(const std::vector<float>& scores, const std::vector<int>& labels);

// Mean binary log-loss of probabilities `p` (clamped to [1e-7, 1-1e-7]).
double LogLoss(const std::vector<float>& p, const std::vector<int>& labels);

inline float Sigmoid(float z) {
  return z >= 0 ? 1.0f / (1.0f + std::exp(-z)) : std::exp(z) / (1.0f + std::exp(z));
}

}  // namespace tessera::models
