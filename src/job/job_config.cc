// JobConfig JSON (see job_config.h).
#include "job/job_config.h"

#include <nlohmann/json.hpp>

namespace tessera {

StatusOr<NonFinitePolicy> ParseNonFinitePolicy(std::string_view s) {
  if (s == "skip") return NonFinitePolicy::kSkip;
  if (s == "error") return NonFinitePolicy::kError;
  return Status::InvalidArgument("non-finite gradient policy '" + std::string(s) + "' is not skip or error");
}

const char* NonFinitePolicyName(NonFinitePolicy p) { return p == NonFinitePolicy::kSkip ? "skip" : "error"; }

Status JobConfig::Validate() const {
  if (pservers < 1 || pservers > 4096)
    return Status::InvalidArgument("pservers must be 1..4096, not " + std::to_string(pservers));
  if (slots < pservers || slots > (1 << 20)) {
    return Status::InvalidArgument("slots must be at least the number of pservers (" +
                                   std::to_string(pservers) + ") and at most 1048576, not " +
                                   std::to_string(slots));
  }
  if (block_size < 1 || block_size > (int64_t{1} << 28)) {
    return Status::InvalidArgument("block size must be 1..268435456 elements, not " +
                                   std::to_string(block_size));
  }
  if (replicas < 1 || replicas > pservers) {
    return Status::InvalidArgument("replicas must be 1..pservers (" + std::to_string(pservers) +
                                   "): each copy of a shard lives on a different pserver, not " +
                                   std::to_string(replicas));
  }
  if (backup_trainers < 0 || (backup_trainers > 0 && mode.kind != ConsistencyMode::Kind::kSync)) {
    return Status::InvalidArgument("backup trainers need sync mode and must be >= 0, not " +
                                   std::to_string(backup_trainers) + " in " + mode.ToString());
  }
  if (backup_trainers > 0 && backup_trainers >= min_trainers) {
    return Status::InvalidArgument("backup trainers (" + std::to_string(backup_trainers) +
                                   ") must be fewer than the trainers a step waits for (min trainers " +
                                   std::to_string(min_trainers) + ")");
  }
  if (initial_pservers < 0 || initial_pservers > pservers) {
    return Status::InvalidArgument(
        "--start-pservers (the pservers an elastic job starts with) must be 1..--pservers (" +
        std::to_string(pservers) + "), not " + std::to_string(initial_pservers));
  }
  if (min_trainers < 1) return Status::InvalidArgument("min trainers must be >= 1");
  if (checkpoint_steps < 0) {
    return Status::InvalidArgument("checkpoint steps must be >= 0, not " + std::to_string(checkpoint_steps));
  }
  if (checkpoint_steps > 0 && mode.kind != ConsistencyMode::Kind::kSync) {
    return Status::InvalidArgument("checkpoint steps (consistent checkpoints) need sync mode, not " +
                                   mode.ToString() + "; use the pservers' --checkpoint-every instead");
  }
  return optimizer.Validate();
}

std::string JobConfig::ToJson() const {
  nlohmann::json j;
  j["pservers"] = pservers;
  j["slots"] = slots;
  j["block_size"] = block_size;
  j["mode"] = mode.ToString();
  j["optimizer"] = optimizer.ToString();
  j["min_trainers"] = min_trainers;
  if (checkpoint_steps > 0) j["checkpoint_steps"] = checkpoint_steps;
  j["nonfinite"] = NonFinitePolicyName(nonfinite);
  if (!wire.plain()) j["wire"] = wire.ToString();
  j["token"] = token;
  j["created_ms"] = created_ms;
  if (!secret_fingerprint.empty()) j["secret_fingerprint"] = secret_fingerprint;
  if (tls) j["tls"] = true;
  if (replicas > 1) j["replicas"] = replicas;
  if (backup_trainers > 0) j["backup_trainers"] = backup_trainers;
  if (initial_pservers > 0) j["initial_pservers"] = initial_pservers;
  return j.dump();
}

StatusOr<JobConfig> JobConfig::FromJson(const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::DataLoss("job config is not a JSON object");
  JobConfig c;
  try {
    c.pservers = j.at("pservers").get<int>();
    c.slots = j.at("slots").get<int>();
    c.block_size = j.at("block_size").get<int64_t>();
    TESSERA_ASSIGN_OR_RETURN(c.mode, ConsistencyMode::Parse(j.at("mode").get<std::string>()));
    TESSERA_ASSIGN_OR_RETURN(c.optimizer, OptimizerConfig::Parse(j.at("optimizer").get<std::string>()));
    c.min_trainers = j.value("min_trainers", 1);
    c.checkpoint_steps = j.value("checkpoint_steps", int64_t{0});
    TESSERA_ASSIGN_OR_RETURN(c.nonfinite, ParseNonFinitePolicy(j.value("nonfinite", std::string("skip"))));
    TESSERA_ASSIGN_OR_RETURN(c.wire, WireChoice::Parse(j.value("wire", std::string("f32"))));
    c.token = j.at("token").get<std::string>();
    c.created_ms = j.value("created_ms", int64_t{0});
    c.secret_fingerprint = j.value("secret_fingerprint", std::string());
    c.tls = j.value("tls", false);
    c.replicas = j.value("replicas", 1);
    c.backup_trainers = j.value("backup_trainers", 0);
    c.initial_pservers = j.value("initial_pservers", 0);
  } catch (const nlohmann::json::exception& e) {
    return Status::DataLoss(std::string("job config: ") + e.what());
  }
  TESSERA_RETURN_IF_ERROR(c.Validate());
  return c;
}

}  // namespace tessera
