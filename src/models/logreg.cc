// logreg: sparse logistic regression over hashed features, for libsvm records (tessera.data.Example
// with feature ids and values; a label > 0 is a click). Feature ids are hashed into 64-bit keys
// of the sparse table "weights" (rows of 1); "bias" is dense. Cost: log-loss summed over the
// batch. Evaluation: AUC and mean log-loss.
#include <unordered_map>

#include "common/hash.h"
#include "models/metrics.h"
#include "models/model.h"
#include "tessera/example.pb.h"

namespace tessera::models {
namespace {

struct Row {
  std::vector<size_t> slots;  // index of each feature's key in the batch's key list
  std::vector<float> values;
  int label = 0;
};

class Logreg : public Model {
 public:
  explicit Logreg(const ModelOptions& o) : opts_(o) {}
  std::string name() const override { return "logreg"; }
  std::string record_type() const override { return "example"; }

  Status Declare(Client& client) override {
    TableLimits limits;
    limits.admit_after = static_cast<int>(opts_.Int("admit", 0));
    limits.evict_after = opts_.Int("evict_after", 0);
    limits.budget_bytes = opts_.Int("budget_mib", 0) << 20;
    TESSERA_RETURN_IF_ERROR(client.AddSparse("weights", 1, InitializerConfig{}, nullptr, &limits));
    return client.AddDense("bias", &bias_, 1);
  }

  StatusOr<StepResult> Step(Client& client, const std::vector<std::string>& records,
                            Gradients* grads) override {
    std::vector<Row> rows;
    TESSERA_RETURN_IF_ERROR(Decode(records, &rows, &keys_));
    weights_.resize(keys_.size());
    TESSERA_RETURN_IF_ERROR(client.SparsePull("weights", keys_, weights_.data()).Wait());
    g_weights_.assign(keys_.size(), 0.0f);
    g_bias_ = 0;
    double cost = 0;
    for (const auto& r : rows) {
      float z = bias_;
      for (size_t i = 0; i < r.slots.size(); ++i) z += weights_[r.slots[i]] * r.values[i];
      float p = Sigmoid(z);
      cost -= r.label ? std::log(std::max(p, 1e-7f)) : std::log(std::max(1 - p, 1e-7f));
      float g = p - static_cast<float>(r.label);
      for (size_t i = 0; i < r.slots.size(); ++i) g_weights_[r.slots[i]] += g * r.values[i];
      g_bias_ += g;
    }
    grads->Sparse("weights", keys_, g_weights_);
    grads->Dense("bias", std::span<const float>(&g_bias_, 1));
    return StepResult{cost, static_cast<int64_t>(rows.size())};
  }

  StatusOr<std::vector<Metric>> Evaluate(Client& client, dataset::DatasetReader& eval) override {
    std::vector<float> scores;
    std::vector<int> labels;
    std::vector<std::string_view> recs;
    for (size_t c = 0; c < eval.manifest().chunks.size(); ++c) {
      TESSERA_RETURN_IF_ERROR(eval.ReadChunk(c, &recs));
      std::vector<std::string> batch(recs.begin(), recs.end());
      std::vector<Row> rows;
      std::vector<uint64_t> keys;
      TESSERA_RETURN_IF_ERROR(Decode(batch, &rows, &keys));
      std::vector<float> w(keys.size());
      TESSERA_RETURN_IF_ERROR(client.SparsePull("weights", keys, w.data()).Wait());
      for (const auto& r : rows) {
        float z = bias_;
        for (size_t i = 0; i < r.slots.size(); ++i) z += w[r.slots[i]] * r.values[i];
        scores.push_back(Sigmoid(z));
        labels.push_back(r.label);
      }
    }
    if (scores.empty()) return Status::InvalidArgument("the evaluation data set is empty");
    return std::vector<Metric>{{"auc", Auc(scores, labels)}, {"logloss", LogLoss(scores, labels)}};
  }

 private:
  // Parses records; keys are the batch's distinct hashed features.
  Status Decode(const std::vector<std::string>& records, std::vector<Row>* rows,
                std::vector<uint64_t>* keys) {
    keys->clear();
    std::unordered_map<uint64_t, size_t> index;
    data::Example ex;
    rows->resize(records.size());
    for (size_t n = 0; n < records.size(); ++n) {
      if (!ex.ParseFromString(records[n])) return Status::DataLoss("logreg: record is not an Example");
      Row& r = (*rows)[n];
      r.slots.clear();
      r.values.clear();
      r.label = std::atof(ex.label().c_str()) > 0 ? 1 : 0;
      for (int i = 0; i < ex.feature_ids_size(); ++i) {
        uint64_t key = Mix64(ex.feature_ids(i));
        auto [it, inserted] = index.try_emplace(key, keys->size());
        if (inserted) keys->push_back(key);
        r.slots.push_back(it->second);
        r.values.push_back(ex.feature_values(i));
      }
    }
    return Status::OK();
  }

  ModelOptions opts_;
  float bias_ = 0, g_bias_ = 0;
  std::vector<uint64_t> keys_;
  std::vector<float> weights_, g_weights_;
};

}  // namespace

std::unique_ptr<Model> NewLogreg(const ModelOptions& o) { return std::make_unique<Logreg>(o); }

}  // namespace tessera::models
