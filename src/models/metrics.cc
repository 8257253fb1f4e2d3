// Evaluation helpers (see metrics.h).
#include "models/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tessera::models {

double Auc(const std::vector<float>& scores, const std::vector<int>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double pos = 0, neg = 0, rank_sum = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    double avg_rank = (static_cast<double>(i) + static_cast<double>(j) + 1) / 2.0;  // 1-based ranks
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]]) {
        rank_sum += avg_rank;
        ++pos;
      } else {
        ++neg;
      }
    }
    i = j;
  }
  if (pos == 0 || neg == 0) return 0.5;
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

double LogLoss(const std::vector<float>& p, const std::vector<int>& labels) {
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    double q = std::clamp(static_cast<double>(p[i]), 1e-7, 1 - 1e-7);
    s -= labels[i] ? std::log(q) : std::log(1 - q);
  }
  return p.empty() ? 0 : s / static_cast<double>(p.size());
}

}  // namespace tessera::models
