// Each role's command line from a job spec (see role_argv.h).
#include "spec/role_argv.h"

#include <fmt/format.h>

#include "common/flag_names.h"

namespace tessera::spec {

namespace {

// What a master and a pserver both serve: the main port on every interface, the HTTP endpoints,
// the lease.
void AddServing(const JobSpec& s, PortChoice ports, std::vector<std::string>* args) {
  if (ports == PortChoice::kLocal) {
    args->insert(args->end(), {flags::kLeaseTtl, std::to_string(s.lease_ttl)});
    return;
  }
  const bool fixed = ports == PortChoice::kSpec;
  args->insert(args->end(), {"--listen", "0.0.0.0", "--port", fixed ? std::to_string(s.port) : "0",
                             flags::kHttpHost, "0.0.0.0", flags::kHttpPort,
                             fixed ? std::to_string(s.http_port) : "0", flags::kLeaseTtl,
                             std::to_string(s.lease_ttl)});
}

}  // namespace

std::vector<std::string> MasterArgs(const JobSpec& s, PortChoice ports) {
  std::vector<std::string> args = {flags::kCommandMaster, flags::kStore,  s.store.path,
                                   flags::kDataset,       s.dataset,      flags::kPasses,
                                   std::to_string(s.passes)};
  AddServing(s, ports, &args);
  if (!s.history_file.empty()) args.insert(args.end(), {flags::kHistoryFile, s.history_file});
  // The task queue's settings: the spec's defaults are the job's, whatever the master's are.
  args.insert(args.end(),
              {flags::kChunksPerTask, std::to_string(s.chunks_per_task), flags::kTaskTimeout,
               fmt::format("{}", s.task_timeout), flags::kMaxFailures, std::to_string(s.max_failures)});
  return args;
}

std::vector<std::string> PserverArgs(const JobSpec& s, PortChoice ports) {
  std::vector<std::string> args = {flags::kCommandPserver};
  AddServing(s, ports, &args);
  args.insert(args.end(), {flags::kTransport, s.transport});
  // Consistent checkpoints (checkpoint_steps) are written to the same directory as timed ones.
  if (s.keeps_checkpoints()) args.insert(args.end(), {flags::kCheckpointDir, s.checkpoints.path});
  if (s.checkpoint_every > 0)
    args.insert(args.end(), {flags::kCheckpointEvery, fmt::format("{}", s.checkpoint_every)});
  return args;
}

TrainerCommand TrainerArgs(const JobSpec& s) {
  if (s.model.empty()) return {false, s.command};
  std::vector<std::string> args = {flags::kCommandTrain, flags::kModel, s.model, flags::kBatchSize,
                                   std::to_string(s.batch_size)};
  if (!s.eval_dataset.empty()) args.insert(args.end(), {flags::kEvalDataset, s.eval_dataset});
  for (const auto& a : s.model_args) args.insert(args.end(), {flags::kModelArg, a});
  return {true, args};
}

std::vector<std::pair<std::string, std::string>> TrainerEnv(const JobSpec& s, PortChoice ports) {
  std::vector<std::pair<std::string, std::string>> env = {
      {flags::kEnvStore, s.store.path},
      {flags::kEnvDataset, s.dataset},
      {flags::kEnvEvalDataset, s.eval_dataset},
      {flags::kEnvBatchSize, std::to_string(s.batch_size)},
      {flags::kEnvLeaseTtl, std::to_string(s.lease_ttl)},
      {flags::kEnvTransport, s.transport}};
  if (ports == PortChoice::kSpec) env.push_back({flags::kEnvHttpPort, std::to_string(s.http_port)});
  return env;
}

std::vector<std::string> EtcdServerFlags(const std::string& retention) {
  return {"--auto-compaction-mode=periodic", "--auto-compaction-retention=" + retention};
}

}  // namespace tessera::spec
