// Synthetic click log (see ctr_gen.h).
#include "models/ctr_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "common/hash.h"
#include "models/metrics.h"

namespace tessera::models {

StatusOr<CtrResult> GenerateCtr(const CtrOptions& o, const std::string& train_path,
                                const std::string& eval_path) {
  if (o.features < o.per_row || o.per_row < 1 || o.train_rows < 1 || o.eval_rows < 1) {
    return Status::InvalidArgument("gen-ctr: need rows >= 1 and features >= per-row >= 1");
  }
  // Zipf CDF over feature ids.
  std::vector<double> cdf(o.features);
  double sum = 0;
  for (int64_t k = 0; k < o.features; ++k) {
    sum += 1.0 / std::pow(static_cast<double>(k + 1), o.zipf);
    cdf[k] = sum;
  }
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> unit(0, 1);
  auto weight = [&](int64_t id) {
    // The true weight of a feature depends only on the seed and the id.
    std::mt19937_64 r(HashCombine(o.seed, static_cast<uint64_t>(id)));
    return std::normal_distribution<double>(0, o.weight_scale)(r);
  };
  CtrResult result;
  int64_t clicks = 0;
  std::vector<float> best_scores;
  std::vector<int> eval_labels;
  for (int pass = 0; pass < 2; ++pass) {
    const std::string& path = pass == 0 ? train_path : eval_path;
    int64_t rows = pass == 0 ? o.train_rows : o.eval_rows;
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return Status::Unavailable("cannot write '" + path + "'");
    for (int64_t n = 0; n < rows; ++n) {
      std::set<int64_t> ids;
      while (static_cast<int>(ids.size()) < o.per_row) {
        ids.insert(std::lower_bound(cdf.begin(), cdf.end(), unit(rng) * sum) - cdf.begin());
      }
      double z = o.bias;
      for (int64_t id : ids) z += weight(id);
      double p = Sigmoid(static_cast<float>(z));
      int label = unit(rng) < p ? 1 : 0;
      clicks += label;
      std::fprintf(f, "%d", label);
      for (int64_t id : ids) std::fprintf(f, " %lld:1", static_cast<long long>(id));
      std::fputc('\n', f);
      if (pass == 1) {
        best_scores.push_back(static_cast<float>(p));
        eval_labels.push_back(label);
      }
    }
    if (std::fclose(f) != 0) return Status::Unavailable("cannot write '" + path + "'");
  }
  result.best_auc = Auc(best_scores, eval_labels);
  result.click_rate = static_cast<double>(clicks) / static_cast<double>(o.train_rows + o.eval_rows);
  return result;
}

}  // namespace tessera::models
