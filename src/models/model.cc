// Model registry and option helpers (see model.h).
#include "models/model.h"

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

StatusOr<std::unique_ptr<Model>> MakeModel(const std::string& name, const ModelOptions& options) {
  if (options.batch_size < 1) return Status::InvalidArgument("batch size must be >= 1");
  if (name == "mlp") return NewMlp(options);
  if (name == "logreg") return NewLogreg(options);
  if (name == "word2vec") return NewWord2vec(options);
  return Status::InvalidArgument("unknown model '" + name + "' (built-in models: mlp, logreg, word2vec)");
}

}  // namespace tessera::models
