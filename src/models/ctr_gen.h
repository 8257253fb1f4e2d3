// A deterministic synthetic click log for the logreg model (`tessera gen-ctr`): each row has
// `per_row` distinct feature ids drawn from a Zipf distribution over `features` ids; each feature
// has a true weight drawn from N(0, weight_scale^2); a row is a click with probability
// sigmoid(bias + sum of its true weights). Written as libsvm ("1 17:1 230:1 ..."). Because the
// true weights are known, the best achievable AUC on the evaluation rows is known too.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/status.h"

namespace tessera::models {

struct CtrOptions {
  int64_t train_rows = 100000;
  int64_t eval_rows = 20000;
  int64_t features = 100000;
  int per_row = 20;
  double zipf = 1.1;
  double weight_scale = 0.5;
  double bias = -1.0;
  uint64_t seed = 1;
};

struct CtrResult {
  double best_auc = 0;  // AUC of the true probabilities on the evaluation rows
  double click_rate = 0;
};

StatusOr<CtrResult> GenerateCtr(const CtrOptions& o, const std::string& train_path,
                                const std::string& eval_path);

}  // namespace tessera::models
