// Command lines of `tessera local`'s children (see child_commands.h).
#include "local/child_commands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "common/net.h"

namespace tessera::local {

namespace fs = std::filesystem;

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
  std::vector<std::string> argv = {o.tessera_bin, "pserver",     "--etcd",
                                   etcd,          "--job",       o.job,
                                   "--index",     std::to_string(index),
                                   "--lease-ttl", std::to_string(o.lease_ttl_seconds),
                                   "--transport", o.transport};
  if (with_checkpoints) argv.insert(argv.end(), {"--checkpoint-dir", o.run_dir + "/checkpoints"});
  if (o.checkpoint_every > 0) argv.insert(argv.end(), {"--checkpoint-every", fmt::format("{}", o.checkpoint_every)});
  return argv;
}

std::vector<std::string> MasterArgv(const LocalOptions& o, const std::string& etcd) {
  return {o.tessera_bin,
          "master",
          "--etcd",
          etcd,
          "--job",
          o.job,
          "--store",
          o.store,
          "--dataset",
          o.dataset,
          "--passes",
          std::to_string(o.passes),
          "--chunks-per-task",
          std::to_string(o.chunks_per_task),
          // A small data set is cut so that every trainer (and any added later) has work.
          "--min-tasks",
          std::to_string(std::max(8, 4 * o.trainers)),
          "--min-task-records",
          std::to_string(o.batch_size),
          "--task-timeout",
          fmt::format("{}", o.task_timeout_s),
          "--max-failures",
          std::to_string(o.max_failures),
          "--lease-ttl",
          std::to_string(o.lease_ttl_seconds),
          "--http-port",
          "0",
          "--log-dir",
          o.run_dir + "/logs",
          "--history-file",
          o.run_dir + "/history.jsonl"};
}

std::vector<std::string> TrainerArgv(const LocalOptions& o) {
  if (o.model.empty()) return {"/bin/sh", "-c", o.trainer_cmd};
  std::vector<std::string> argv = {o.tessera_bin,   "train",
                                   "--model",       o.model,
                                   "--batch-size",  std::to_string(o.batch_size),
                                   "--lease-ttl",   std::to_string(o.lease_ttl_seconds)};
  if (!o.eval_dataset.empty()) argv.insert(argv.end(), {"--eval-dataset", o.eval_dataset});
  for (const auto& a : o.model_args) argv.insert(argv.end(), {"--model-arg", a});
  return argv;
}

std::map<std::string, std::string> TrainerEnv(const LocalOptions& o, const std::string& etcd, int slot) {
  std::map<std::string, std::string> env = {{"TESSERA_ETCD", etcd},
                                            {"TESSERA_JOB", o.job},
                                            {"TESSERA_TRAINER_ID", std::to_string(slot)},
                                            {"TESSERA_STORE", o.store},
                                            {"TESSERA_DATASET", o.dataset},
                                            {"TESSERA_EVAL_DATASET", o.eval_dataset},
                                            {"TESSERA_RUN_DIR", o.run_dir},
                                            {"TESSERA_BATCH_SIZE", std::to_string(o.batch_size)},
                                            {"TESSERA_LEASE_TTL", std::to_string(o.lease_ttl_seconds)},
                                            {"TESSERA_TRANSPORT", o.transport}};
  // `import tessera` in a trainer command finds the module built (or installed) beside this binary.
  fs::path bin = fs::path(o.tessera_bin).parent_path();
  for (const fs::path& dir : {bin / "../python", bin / "../lib/tessera/python"}) {
    std::error_code ec;
    if (!fs::exists(dir / "tessera" / "__init__.py", ec)) continue;
    const char* old = std::getenv("PYTHONPATH");
    env["PYTHONPATH"] = fs::weakly_canonical(dir, ec).string() + (old && *old ? std::string(":") + old : "");
    break;
  }
  return env;
}

}  // namespace tessera::local
