// Wire conversions (see wire_convert.h).
#include "job/wire_convert.h"

namespace tessera {

wire::OptimizerSpec ToWire(const OptimizerConfig& c) {
  wire::OptimizerSpec s;
  s.set_type(std::string(OptimizerTypeName(c.type)));
  s.set_lr(c.lr);
  s.set_weight_decay(c.weight_decay);
  s.set_momentum(c.momentum);
  s.set_nesterov(c.nesterov);
  s.set_beta1(c.beta1);
  s.set_beta2(c.beta2);
  s.set_eps(c.eps);
  s.set_initial_accumulator(c.initial_accumulator);
  s.set_ftrl_beta(c.ftrl_beta);
  s.set_l1(c.l1);
  s.set_l2(c.l2);
  return s;
}

StatusOr<OptimizerConfig> FromWire(const wire::OptimizerSpec& s) {
  TESSERA_ASSIGN_OR_RETURN(OptimizerConfig c, OptimizerConfig::Parse(s.type()));
  c.lr = s.lr();
  c.weight_decay = s.weight_decay();
  c.momentum = s.momentum();
  c.nesterov = s.nesterov();
  c.beta1 = s.beta1();
  c.beta2 = s.beta2();
  c.eps = s.eps();
  c.initial_accumulator = s.initial_accumulator();
  if (c.type == OptimizerConfig::Type::kFtrl) {
    c.ftrl_beta = s.ftrl_beta();
    c.l1 = s.l1();
    c.l2 = s.l2();
  }
  TESSERA_RETURN_IF_ERROR(c.Validate());
  return c;
}

wire::InitializerSpec ToWire(const InitializerConfig& c) {
  wire::InitializerSpec s;
  switch (c.type) {
    case InitializerConfig::Type::kZeros:
      s.set_type("zeros");
      break;
    case InitializerConfig::Type::kUniform:
      s.set_type("uniform");
      break;
    case InitializerConfig::Type::kNormal:
      s.set_type("normal");
      break;
  }
  s.set_a(c.a);
  s.set_b(c.b);
  s.set_seed(c.seed);
  return s;
}

StatusOr<InitializerConfig> FromWire(const wire::InitializerSpec& s) {
  InitializerConfig c;
  if (s.type() == "zeros" || s.type().empty())
    c.type = InitializerConfig::Type::kZeros;
  else if (s.type() == "uniform")
    c.type = InitializerConfig::Type::kUniform;
  else if (s.type() == "normal")
    c.type = InitializerConfig::Type::kNormal;
  else
    return Status::InvalidArgument("unknown initializer '" + s.type() + "'");
  c.a = s.a();
  c.b = s.b();
  c.seed = s.seed();
  return c;
}

wire::TableLimitsSpec ToWire(const TableLimits& l) {
  wire::TableLimitsSpec s;
  s.set_admit_after(l.admit_after);
  s.set_admit_prob(l.admit_prob >= 1 ? 0.0f : l.admit_prob);
  s.set_evict_after(l.evict_after);
  s.set_budget_bytes(l.budget_bytes);
  return s;
}

StatusOr<TableLimits> FromWire(const wire::TableLimitsSpec& s) {
  TableLimits l;
  l.admit_after = s.admit_after();
  l.admit_prob = s.admit_prob() == 0 ? 1.0f : s.admit_prob();
  l.evict_after = s.evict_after();
  l.budget_bytes = s.budget_bytes();
  TESSERA_RETURN_IF_ERROR(l.Validate());
  return l;
}

}  // namespace tessera
