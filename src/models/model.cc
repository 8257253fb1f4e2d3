// Model registry and option helpers (see model.h).
#include "models/model.h"

#include <algorithm>

#include "common/strings.h"

namespace tessera::models {

std::unique_ptr<Model> NewMlp(const ModelOptions& o);
std::unique_ptr<Model> NewLogreg(const ModelOptions& o);
std::unique_ptr<Model> NewWord2vec(const ModelOptions& o);

int64_t ModelOptions::Int(const std::string& key, int64_t def) const {
  auto it = args.find(key);
  if (it == args.end()) return def;
  auto v = ParseInt64(it->second, key);
  return v.ok() ? *v : def;
}

double ModelOptions::Double(const std::string& key, double def) const {
  auto it = args.find(key);
  if (it == args.end()) return def;
  auto v = ParseDouble(it->second, key);
  return v.ok() ? *v : def;
}

std::string ModelOptions::Str(const std::string& key, const std::string& def) const {
  auto it = args.find(key);
  return it == args.end() ? def : it->second;
}

StatusOr<std::map<std::string, std::string>> ParseModelArgs(const std::vector<std::string>& args) {
  std::map<std::string, std::string> out;
  for (const auto& a : args) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::InvalidArgument("model setting '" + a + "' is not key=value");
    out[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return out;
}

const std::vector<ModelInfo>& BuiltinModels() {
  static const std::vector<ModelInfo> models = {
      {"mlp",
       "a classifier with one hidden layer, for images (e.g. Fashion-MNIST)",
       "idx",
       {{"hidden", 256, 1, "hidden units"},
        {"classes", 10, 2, "classes (labels 0..classes-1)"},
        {"inputs", 784, 1, "pixels per image"},
        {"pieces", 0, 0, "gradients pushed in pieces as backward computes them (1) or once a step (0)", 1}}},
      {"logreg",
       "sparse logistic regression over hashed features, for click logs",
       "libsvm",
       {{"admit", 0, 0, "pushes of a feature before it gets a weight (0: the first)", 255},
        {"evict_after", 0, 0, "drop weights not updated in this many pushes of the table (0: never)"},
        {"budget_mib", 0, 0,
         "MiB of weights per pserver; least recently updated dropped past it (0: no limit)",
         int64_t{1} << 30}}},
      {"word2vec",
       "skip-gram word embeddings with negative sampling, for text",
       "text",
       {{"dim", 32, 1, "embedding size"},
        {"window", 3, 1, "context words on each side"},
        {"negatives", 5, 0, "negative samples per word"}}},
  };
  return models;
}

StatusOr<const ModelInfo*> FindModel(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& m : BuiltinModels()) {
    if (m.name == name) return &m;
    names.push_back(m.name);
  }
  return Status::InvalidArgument("unknown model '" + name + "' (built-in models: " + Join(names, ", ") + ")");
}

Status CheckModelArgs(const ModelInfo& model, const std::map<std::string, std::string>& args) {
  std::vector<std::string> keys;
  for (const auto& s : model.settings) keys.push_back(s.key);
  for (const auto& [key, value] : args) {
    auto it = std::find_if(model.settings.begin(), model.settings.end(),
                           [&](const ModelSetting& s) { return s.key == key; });
    if (it == model.settings.end()) {
      return Status::InvalidArgument(
          "model " + model.name + " has no setting '" + key + "' (" +
          (keys.empty() ? std::string("it has none") : "its settings: " + Join(keys, ", ")) + ")");
    }
    auto v = ParseInt64(value, key);
    if (!v.ok() || *v < it->min_value || *v > it->max_value) {
      return Status::InvalidArgument(
          "model " + model.name + " setting " + key + "=" + value + ": " + it->help +
          " must be a whole number >= " + std::to_string(it->min_value) +
          (it->max_value < INT64_MAX ? " and <= " + std::to_string(it->max_value) : ""));
    }
  }
  return Status::OK();
}

Status CheckModelData(const ModelInfo& model, const ModelOptions& options, const dataset::Manifest& data,
                      const std::string& role) {
  if (data.format != model.formats) {
    return Status::InvalidArgument("model " + model.name + " trains on data sets uploaded with --format " +
                                   model.formats + ", but " + role + " '" + data.name +
                                   "' was uploaded with --format " + data.format + " (" +
                                   std::to_string(data.records) + " " + data.record_type + " records)");
  }
  if (model.name == "mlp") {
    int64_t pixels = data.meta.value("rows", int64_t{0}) * data.meta.value("cols", int64_t{0});
    int64_t inputs = options.Int("inputs", 784);
    if (pixels > 0 && pixels != inputs) {
      return Status::InvalidArgument(role + " '" + data.name + "' has images of " + std::to_string(pixels) +
                                     " pixels, but the mlp takes " + std::to_string(inputs) +
                                     " (set --model-arg inputs=" + std::to_string(pixels) + ")");
    }
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<Model>> MakeModel(const std::string& name, const ModelOptions& options) {
  if (options.batch_size < 1) {
    return Status::InvalidArgument("batch size must be >= 1, got " + std::to_string(options.batch_size));
  }
  TESSERA_ASSIGN_OR_RETURN(const ModelInfo* info, FindModel(name));
  TESSERA_RETURN_IF_ERROR(CheckModelArgs(*info, options.args));
  if (name == "mlp") return NewMlp(options);
  if (name == "logreg") return NewLogreg(options);
  return NewWord2vec(options);
}

}  // namespace tessera::models
