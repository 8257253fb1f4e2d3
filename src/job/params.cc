// Parsing and printing of optimizer, initializer and consistency specs (see tessera/params.h).
#include "tessera/params.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>

#include "common/strings.h"

namespace tessera {
namespace {

// Splits "name:k=v,k=v" into the name and its key/value list.
struct Spec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> kv;
  std::vector<std::string> positional;
};

Spec SplitSpec(std::string_view s) {
  Spec out;
  size_t colon = s.find(':');
  out.name = std::string(Trim(s.substr(0, colon)));
  if (colon == std::string_view::npos) return out;
  for (const auto& part : Split(s.substr(colon + 1), ',')) {
    size_t eq = part.find('=');
    if (eq == std::string::npos) {
      out.positional.push_back(std::string(Trim(part)));
    } else {
      out.kv.emplace_back(std::string(Trim(std::string_view(part).substr(0, eq))),
                          std::string(Trim(std::string_view(part).substr(eq + 1))));
    }
  }
  return out;
}

std::string Num(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

std::string_view OptimizerTypeName(OptimizerConfig::Type t) {
  switch (t) {
    case OptimizerConfig::Type::kSgd:
      return "sgd";
    case OptimizerConfig::Type::kMomentum:
      return "momentum";
    case OptimizerConfig::Type::kAdagrad:
      return "adagrad";
    case OptimizerConfig::Type::kAdam:
      return "adam";
    case OptimizerConfig::Type::kFtrl:
      return "ftrl";
  }
  return "?";
}

StatusOr<OptimizerConfig> OptimizerConfig::Parse(std::string_view spec) {
  Spec s = SplitSpec(spec);
  OptimizerConfig c;
  if (s.name == "sgd")
    c.type = Type::kSgd;
  else if (s.name == "momentum")
    c.type = Type::kMomentum;
  else if (s.name == "adagrad")
    c.type = Type::kAdagrad;
  else if (s.name == "adam")
    c.type = Type::kAdam;
  else if (s.name == "ftrl")
    c.type = Type::kFtrl;
  else {
    return Status::InvalidArgument("unknown optimizer '" + s.name +
                                   "' (use sgd, momentum, adagrad, adam or ftrl)");
  }
  if (c.type == Type::kFtrl) c.lr = 0.1f;  // alpha
  if (!s.positional.empty()) {
    return Status::InvalidArgument("optimizer '" + std::string(spec) + "': expected key=value settings");
  }
  for (const auto& [k, v] : s.kv) {
    TESSERA_ASSIGN_OR_RETURN(double d, ParseDouble(v, "optimizer setting " + k));
    float f = static_cast<float>(d);
    // Settings that belong to another optimizer are refused, so a typo cannot pass unnoticed.
    auto only = [&](std::initializer_list<Type> types) {
      return std::find(types.begin(), types.end(), c.type) != types.end();
    };
    if (k == "lr" || (k == "alpha" && c.type == Type::kFtrl))
      c.lr = f;
    else if ((k == "beta" || k == "l1" || k == "l2") && !only({Type::kFtrl}))
      return Status::InvalidArgument("optimizer '" + s.name + "' has no setting '" + k + "' (ftrl has)");
    else if (k == "beta")
      c.ftrl_beta = f;
    else if (k == "l1")
      c.l1 = f;
    else if (k == "l2")
      c.l2 = f;
    else if (k == "weight_decay" || k == "wd")
      c.weight_decay = f;
    else if (k == "momentum")
      c.momentum = f;
    else if (k == "nesterov")
      c.nesterov = d != 0;
    else if (k == "beta1")
      c.beta1 = f;
    else if (k == "beta2")
      c.beta2 = f;
    else if (k == "eps")
      c.eps = f;
    else if (k == "initial_accumulator")
      c.initial_accumulator = f;
    else
      return Status::InvalidArgument("optimizer '" + s.name + "' has no setting '" + k + "'");
  }
  TESSERA_RETURN_IF_ERROR(c.Validate());
  return c;
}

Status OptimizerConfig::Validate() const {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("optimizer " + ToString() + ": " + what);
  };
  if (!(lr > 0) || !std::isfinite(lr)) return bad("lr must be a positive number");
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay)) return bad("weight_decay must be >= 0");
  if (!(momentum >= 0 && momentum < 1)) return bad("momentum must be in [0, 1)");
  if (!(beta1 >= 0 && beta1 < 1)) return bad("beta1 must be in [0, 1)");
  if (!(beta2 >= 0 && beta2 < 1)) return bad("beta2 must be in [0, 1)");
  if (!(eps > 0)) return bad("eps must be > 0");
  if (!(initial_accumulator >= 0)) return bad("initial_accumulator must be >= 0");
  if (!(ftrl_beta >= 0) || !std::isfinite(ftrl_beta)) return bad("beta must be >= 0");
  if (!(l1 >= 0) || !std::isfinite(l1)) return bad("l1 must be >= 0");
  if (!(l2 >= 0) || !std::isfinite(l2)) return bad("l2 must be >= 0");
  return Status::OK();
}

int OptimizerConfig::StateArrays() const {
  switch (type) {
    case Type::kSgd:
      return 0;
    case Type::kMomentum:
      return 1;
    case Type::kAdagrad:
      return 1;
    case Type::kAdam:
    case Type::kFtrl:
      return 2;
  }
  return 0;
}

std::string OptimizerConfig::ToString() const {
  std::string s(OptimizerTypeName(type));
  if (type == Type::kFtrl) {
    s += ":alpha=" + Num(lr) + ",beta=" + Num(ftrl_beta) + ",l1=" + Num(l1) + ",l2=" + Num(l2);
    if (weight_decay != 0) s += ",weight_decay=" + Num(weight_decay);
    return s;
  }
  s += ":lr=" + Num(lr);
  if (weight_decay != 0) s += ",weight_decay=" + Num(weight_decay);
  switch (type) {
    case Type::kSgd:
      break;
    case Type::kMomentum:
      s += ",momentum=" + Num(momentum);
      if (nesterov) s += ",nesterov=1";
      break;
    case Type::kAdagrad:
      s += ",eps=" + Num(eps);
      if (initial_accumulator != 0) s += ",initial_accumulator=" + Num(initial_accumulator);
      break;
    case Type::kAdam:
      s += ",beta1=" + Num(beta1) + ",beta2=" + Num(beta2) + ",eps=" + Num(eps);
      break;
    case Type::kFtrl:
      break;
  }
  return s;
}

StatusOr<InitializerConfig> InitializerConfig::Parse(std::string_view spec) {
  Spec s = SplitSpec(spec);
  InitializerConfig c;
  size_t need = 0;
  if (s.name == "zeros")
    c.type = Type::kZeros;
  else if (s.name == "uniform") {
    c.type = Type::kUniform;
    need = 2;
  } else if (s.name == "normal") {
    c.type = Type::kNormal;
    need = 2;
  } else
    return Status::InvalidArgument("unknown initializer '" + s.name +
                                   "' (use zeros, uniform:LOW,HIGH or normal:MEAN,STDDEV)");
  if (s.positional.size() != need) {
    return Status::InvalidArgument("initializer '" + std::string(spec) + "' needs " + std::to_string(need) +
                                   " numbers");
  }
  if (need == 2) {
    TESSERA_ASSIGN_OR_RETURN(double a, ParseDouble(s.positional[0], "initializer"));
    TESSERA_ASSIGN_OR_RETURN(double b, ParseDouble(s.positional[1], "initializer"));
    c.a = static_cast<float>(a);
    c.b = static_cast<float>(b);
  }
  for (const auto& [k, v] : s.kv) {
    if (k != "seed") return Status::InvalidArgument("initializer has no setting '" + k + "'");
    TESSERA_ASSIGN_OR_RETURN(c.seed, ParseUint64(v, "initializer seed"));
  }
  if (c.type == Type::kUniform && !(c.a <= c.b))
    return Status::InvalidArgument("uniform initializer needs LOW <= HIGH");
  if (c.type == Type::kNormal && !(c.b >= 0))
    return Status::InvalidArgument("normal initializer needs STDDEV >= 0");
  return c;
}

std::string InitializerConfig::ToString() const {
  std::string s;
  switch (type) {
    case Type::kZeros:
      s = "zeros";
      break;
    case Type::kUniform:
      s = "uniform:" + Num(a) + "," + Num(b);
      break;
    case Type::kNormal:
      s = "normal:" + Num(a) + "," + Num(b);
      break;
  }
  if (seed != 0) s += (type == Type::kZeros ? ":seed=" : ",seed=") + std::to_string(seed);
  return s;
}

namespace {

// "64MiB", "512K", "1G", "1048576": bytes.
StatusOr<int64_t> ParseByteSize(std::string_view v, std::string_view what) {
  static const std::pair<std::string_view, int64_t> kUnits[] = {
      {"KiB", int64_t{1} << 10}, {"MiB", int64_t{1} << 20}, {"GiB", int64_t{1} << 30},
      {"K", int64_t{1} << 10},   {"M", int64_t{1} << 20},   {"G", int64_t{1} << 30}};
  int64_t unit = 1;
  for (const auto& [suffix, n] : kUnits) {
    if (v.size() > suffix.size() && v.substr(v.size() - suffix.size()) == suffix) {
      v.remove_suffix(suffix.size());
      unit = n;
      break;
    }
  }
  auto x = ParseInt64(Trim(v), what);
  if (!x.ok() || *x < 0 || *x > (int64_t{1} << 50) / unit)
    return Status::InvalidArgument(std::string(what) + ": '" + std::string(v) +
                                   "' is not a size in bytes (e.g. 64MiB)");
  return *x * unit;
}

}  // namespace

StatusOr<TableLimits> TableLimits::Parse(std::string_view spec) {
  TableLimits l;
  if (Trim(spec).empty() || Trim(spec) == "none") return l;
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("table limits '" + std::string(spec) + "': " + why);
  };
  for (const auto& part : Split(spec, ',')) {
    size_t eq = part.find('=');
    if (eq == std::string::npos)
      return bad("'" + part + "' is not key=value (keys: admit, admit_prob, evict_after, budget)");
    std::string k(Trim(std::string_view(part).substr(0, eq)));
    std::string_view v = Trim(std::string_view(part).substr(eq + 1));
    if (k == "admit") {
      auto n = ParseInt64(v, "admit");
      if (!n.ok() || *n < 0 || *n > 255) return bad("admit must be a count of pushes in 0..255");
      l.admit_after = static_cast<int>(*n);
    } else if (k == "admit_prob") {
      auto p = ParseDouble(v, "admit_prob");
      if (!p.ok()) return bad("admit_prob must be a number in (0, 1]");
      l.admit_prob = static_cast<float>(*p);
    } else if (k == "evict_after") {
      auto n = ParseInt64(v, "evict_after");
      if (!n.ok()) return bad("evict_after must be a count of updates >= 0");
      l.evict_after = *n;
    } else if (k == "budget") {
      TESSERA_ASSIGN_OR_RETURN(l.budget_bytes, ParseByteSize(v, "table limits budget"));
    } else {
      return bad("no setting '" + k + "' (keys: admit, admit_prob, evict_after, budget)");
    }
  }
  // The ranges are Validate's, shared with the wire and the client.
  if (Status s = l.Validate(); !s.ok()) return bad(s.message().substr(s.message().find(": ") + 2));
  return l;
}

Status TableLimits::Validate() const {
  if (admit_after < 0 || admit_after > 255)
    return Status::InvalidArgument("table limits: admit must be a count of pushes in 0..255, not " +
                                   std::to_string(admit_after));
  if (!(admit_prob > 0 && admit_prob <= 1))
    return Status::InvalidArgument("table limits: admit_prob must be in (0, 1]");
  if (admit_after > 1 && admit_prob < 1)
    return Status::InvalidArgument("table limits: give admit or admit_prob, not both");
  if (evict_after < 0) return Status::InvalidArgument("table limits: evict_after must be >= 0");
  if (budget_bytes < 0 || budget_bytes > (int64_t{1} << 50))
    return Status::InvalidArgument("table limits: budget must be 0..1 PiB");
  return Status::OK();
}

std::string TableLimits::ToString() const {
  std::vector<std::string> parts;
  if (admit_after > 1) parts.push_back("admit=" + std::to_string(admit_after));
  if (admit_prob < 1) parts.push_back("admit_prob=" + Num(admit_prob));
  if (evict_after > 0) parts.push_back("evict_after=" + std::to_string(evict_after));
  if (budget_bytes > 0) parts.push_back("budget=" + std::to_string(budget_bytes));
  return Join(parts, ",");
}

StatusOr<ConsistencyMode> ConsistencyMode::Parse(std::string_view spec) {
  ConsistencyMode m;
  if (spec == "sync") return m;
  if (spec == "async") {
    m.kind = Kind::kAsync;
    return m;
  }
  if (StartsWith(spec, "ssp:")) {
    auto s = ParseInt64(spec.substr(4), "ssp staleness");
    if (!s.ok() || *s < 0)
      return Status::InvalidArgument("mode '" + std::string(spec) + "': staleness must be an integer >= 0");
    m.kind = Kind::kSsp;
    m.staleness = *s;
    return m;
  }
  return Status::InvalidArgument("unknown mode '" + std::string(spec) + "' (use sync, async or ssp:S)");
}

std::string ConsistencyMode::ToString() const {
  switch (kind) {
    case Kind::kSync:
      return "sync";
    case Kind::kAsync:
      return "async";
    case Kind::kSsp:
      return "ssp:" + std::to_string(staleness);
  }
  return "?";
}

}  // namespace tessera
