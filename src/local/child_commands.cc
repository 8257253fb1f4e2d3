// Command lines of `tessera local`'s children (see child_commands.h).
#include "local/child_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "common/busy_poll.h"
#include "common/flag_names.h"
#include "common/math_threads.h"
#include "common/net.h"
#include "supervise/python_path.h"

namespace tessera::local {

namespace fs = std::filesystem;

namespace {

// Every trainer and pserver runs here.
std::optional<int> BusyPoll(const LocalOptions& o) {
  return HostBusyPoll(o.busy_poll_us, HostCores(), o.trainers + o.pservers, ::getenv);
}

}  // namespace

EtcdCommand EtcdArgv(const LocalOptions& o) {
  int client = FreeLoopbackPort(), peer = FreeLoopbackPort();
  while (peer == client) peer = FreeLoopbackPort();
  const std::string c = "http://127.0.0.1:" + std::to_string(client),
                    p = "http://127.0.0.1:" + std::to_string(peer);
  return {{"/usr/bin/etcd", "--name=local", "--data-dir=" + o.run_dir + "/etcd", "--listen-client-urls=" + c,
           "--advertise-client-urls=" + c, "--listen-peer-urls=" + p, "--initial-advertise-peer-urls=" + p,
           "--initial-cluster=local=" + p, "--logger=zap", "--log-level=warn"},
          "127.0.0.1:" + std::to_string(client)};
}

std::vector<std::string> PserverArgv(const LocalOptions& o, const std::string& etcd, bool with_checkpoints,
                                     int index) {
  std::vector<std::string> argv = {o.tessera_bin,     flags::kCommandPserver,
                                   flags::kEtcd,      etcd,
                                   flags::kJob,       o.job,
                                   flags::kIndex,     std::to_string(index),
                                   flags::kLeaseTtl,  std::to_string(o.lease_ttl_seconds),
                                   flags::kTransport, o.transport};
  if (with_checkpoints) argv.insert(argv.end(), {flags::kCheckpointDir, CheckpointDirOf(o)});
  if (o.checkpoint_every > 0)
    argv.insert(argv.end(), {flags::kCheckpointEvery, fmt::format("{}", o.checkpoint_every)});
  if (auto spin = BusyPoll(o)) argv.insert(argv.end(), {flags::kBusyPoll, std::to_string(*spin)});
  return argv;
}

std::vector<std::string> MasterArgv(const LocalOptions& o, const std::string& etcd) {
  std::vector<std::string> argv = {
      o.tessera_bin, flags::kCommandMaster, flags::kEtcd, etcd, flags::kJob, o.job, flags::kStore, o.store,
      flags::kDataset, o.dataset, flags::kPasses, std::to_string(o.passes), flags::kChunksPerTask,
      std::to_string(o.chunks_per_task),
      // A small data set is cut so that every trainer (and any added later) has work.
      flags::kMinTasks, std::to_string(std::max(8, 4 * o.trainers)), flags::kMinTaskRecords,
      std::to_string(o.batch_size), flags::kTaskTimeout, fmt::format("{}", o.task_timeout_s),
      flags::kMaxFailures, std::to_string(o.max_failures), flags::kLeaseTtl,
      std::to_string(o.lease_ttl_seconds), flags::kHttpPort, "0", flags::kLogDir, o.run_dir + "/logs",
      flags::kHistoryFile, o.run_dir + "/history.jsonl"};
  if (o.follow) argv.push_back("--follow");
  return argv;
}

std::vector<std::string> TrainerArgv(const LocalOptions& o) {
  if (o.model.empty()) return {"/bin/sh", "-c", o.trainer_cmd};
  std::vector<std::string> argv = {
      o.tessera_bin,     flags::kCommandTrain,         flags::kModel,    o.model,
      flags::kBatchSize, std::to_string(o.batch_size), flags::kLeaseTtl, std::to_string(o.lease_ttl_seconds)};
  if (!o.eval_dataset.empty()) argv.insert(argv.end(), {flags::kEvalDataset, o.eval_dataset});
  for (const auto& a : o.model_args) argv.insert(argv.end(), {flags::kModelArg, a});
  return argv;
}

std::map<std::string, std::string> TrainerEnv(const LocalOptions& o, const std::string& etcd, int slot) {
  std::map<std::string, std::string> env = {{flags::kEnvEtcd, etcd},
                                            {flags::kEnvJob, o.job},
                                            {flags::kEnvTrainerId, std::to_string(slot)},
                                            {flags::kEnvStore, o.store},
                                            {flags::kEnvDataset, o.dataset},
                                            {flags::kEnvEvalDataset, o.eval_dataset},
                                            {flags::kEnvRunDir, o.run_dir},
                                            {flags::kEnvBatchSize, std::to_string(o.batch_size)},
                                            {flags::kEnvLeaseTtl, std::to_string(o.lease_ttl_seconds)},
                                            {flags::kEnvTransport, o.transport}};
  for (const auto& [k, v] : supervise::PythonPathBeside(o.tessera_bin)) env[k] = v;
  // Each trainer's math libraries get its share of the cores.
  for (const auto& [k, v] : MathThreadEnv(HostCores(), o.trainers + o.pservers, ::getenv)) env[k] = v;
  if (auto spin = BusyPoll(o)) env[flags::kEnvBusyPoll] = std::to_string(*spin);
  return env;
}

}  // namespace tessera::local
