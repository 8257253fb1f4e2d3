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
#include "spec/role_argv.h"
#include "supervise/python_path.h"

namespace tessera::local {

namespace fs = std::filesystem;

namespace {

// Every trainer and pserver runs here.
std::optional<int> BusyPoll(const LocalOptions& o) {
  return HostBusyPoll(o.busy_poll_us, HostCores(), o.spec.trainers_max + o.spec.pservers, ::getenv);
}

}  // namespace

EtcdCommand EtcdArgv(const LocalOptions& o) {
  int client = FreeLoopbackPort(), peer = FreeLoopbackPort();
  while (peer == client) peer = FreeLoopbackPort();
  const std::string c = "http://127.0.0.1:" + std::to_string(client),
                    p = "http://127.0.0.1:" + std::to_string(peer);
  EtcdCommand cmd{
      {"/usr/bin/etcd", "--name=local", "--data-dir=" + o.run_dir + "/etcd", "--listen-client-urls=" + c,
       "--advertise-client-urls=" + c, "--listen-peer-urls=" + p, "--initial-advertise-peer-urls=" + p,
       "--initial-cluster=local=" + p, "--logger=zap", "--log-level=warn"},
      "127.0.0.1:" + std::to_string(client)};
  for (auto& f : spec::EtcdServerFlags()) cmd.argv.push_back(std::move(f));
  return cmd;
}

// The job's spec as its roles' command lines read it (spec/role_argv.h): the run's checkpoint
// directory and history file.
spec::JobSpec RoleSpec(const LocalOptions& o) {
  spec::JobSpec s = o.spec;
  s.checkpoints.path = CheckpointDirOf(o);
  s.history_file = o.run_dir + "/history.jsonl";
  return s;
}

std::vector<std::string> PserverArgv(const LocalOptions& o, const std::string& etcd, bool with_checkpoints,
                                     int index) {
  const spec::JobSpec s = RoleSpec(o);
  std::vector<std::string> argv = {o.tessera_bin};
  for (auto& a : spec::PserverArgs(s, spec::PortChoice::kLocal)) argv.push_back(std::move(a));
  argv.insert(argv.end(),
              {flags::kEtcd, etcd, flags::kJob, o.spec.name, flags::kIndex, std::to_string(index)});
  // A resumed run loads the checkpoints its earlier run kept, whether or not it keeps more.
  if (with_checkpoints && !s.keeps_checkpoints())
    argv.insert(argv.end(), {flags::kCheckpointDir, s.checkpoints.path});
  if (auto spin = BusyPoll(o)) argv.insert(argv.end(), {flags::kBusyPoll, std::to_string(*spin)});
  return argv;
}

std::vector<std::string> MasterArgv(const LocalOptions& o, const std::string& etcd) {
  std::vector<std::string> argv = {o.tessera_bin};
  for (auto& a : spec::MasterArgs(RoleSpec(o), spec::PortChoice::kLocal)) argv.push_back(std::move(a));
  argv.insert(argv.end(),
              {flags::kEtcd, etcd, flags::kJob, o.spec.name,
               // A small data set is cut so that every trainer (and any added later) has work.
               flags::kMinTasks, std::to_string(std::max(8, 4 * o.spec.trainers_max)), flags::kMinTaskRecords,
               std::to_string(o.spec.batch_size), flags::kLogDir, o.run_dir + "/logs"});
  if (o.follow) argv.push_back("--follow");
  return argv;
}

std::vector<std::string> TrainerArgv(const LocalOptions& o) {
  spec::TrainerCommand t = spec::TrainerArgs(RoleSpec(o));
  if (t.builtin) t.argv.insert(t.argv.begin(), o.tessera_bin);
  return t.argv;
}

std::map<std::string, std::string> TrainerEnv(const LocalOptions& o, const std::string& etcd, int slot) {
  std::map<std::string, std::string> env = {{flags::kEnvEtcd, etcd},
                                            {flags::kEnvJob, o.spec.name},
                                            {flags::kEnvTrainerId, std::to_string(slot)},
                                            {flags::kEnvRunDir, o.run_dir}};
  for (auto& [k, v] : spec::TrainerEnv(RoleSpec(o), spec::PortChoice::kLocal)) env[k] = v;
  for (const auto& [k, v] : supervise::PythonPathBeside(o.tessera_bin)) env[k] = v;
  // Each trainer's math libraries get its share of the cores.
  for (const auto& [k, v] : MathThreadEnv(HostCores(), o.spec.trainers_max + o.spec.pservers, ::getenv))
    env[k] = v;
  if (auto spin = BusyPoll(o)) env[flags::kEnvBusyPoll] = std::to_string(*spin);
  return env;
}

}  // namespace tessera::local
