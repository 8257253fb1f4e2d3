// Launcher (see launcher.h): the class behind RunLaunch, shared by launcher.cc and
// launcher_processes.cc. Internal to launch/.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/master_client.h"
#include "common/process.h"
#include "common/strings.h"
#include "coord/etcd_client.h"
#include "job/job_config.h"
#include "launch/hosts_file.h"
#include "launch/launcher.h"
#include "launch/plan.h"
#include "security/job_secret.h"
#include "security/tls_config.h"
#include "spec/job_spec.h"
#include "supervise/restart_policy.h"
#include "supervise/run_dir.h"
#include "supervise/terminal_console.h"

namespace tessera::launch {

using supervise::Role;

inline constexpr std::chrono::seconds kNodesStopWait{40};  // a node's own grace (15 s) and its etcd poll
inline constexpr std::chrono::seconds kEtcdStopWait{20};

inline std::string Quoted(const std::vector<std::string>& argv) {
  std::vector<std::string> q;
  for (const auto& a : argv) q.push_back(ShellQuote(a));
  return Join(q, " ");
}

// A launched process on this machine: mpirun, an ssh client, or etcd's node.
struct Started {
  std::string name;   // "pserver-0", "mpirun", "etcd"
  std::string where;  // "on 10.0.0.2", "here"
  Role role = Role::kTrainer;
  bool is_mpirun = false;
  std::unique_ptr<Process> proc;
  bool ended = false;
};

// The launcher: launcher.cc (preparing, the dry run, creating the job, the main loop) and
// launcher_processes.cc (starting etcd and the nodes over ssh or mpirun, watching and stopping
// them).
class Launcher {
 public:
  Launcher(LaunchOptions o, const std::atomic<bool>* stop)
      : o_(std::move(o)), stop_(stop), console_(o_.progress_tty) {}
  ~Launcher() { StopEverything("stopped"); }

  StatusOr<LaunchResult> Run();

 private:
  Status Prepare();
  Status DryRun();
  // The run directory locked and new (nothing of an earlier run, no model at --model-out).
  Status OpenRunDir();
  // The job's configuration, secret and TLS, as every process of the job reads them.
  Status ReadJob();
  // Shows progress until every pass is done and the trainers have left (completed), Ctrl-C, or
  // a launched process's failure (returned).
  Status FollowProgress(master::MasterClient& master, LaunchResult* result);
  // The model exported to --model-out and result.json written.
  Status Finish(master::MasterClient& master, LaunchResult* result);
  Status StartEtcd();
  Status CreateJob();
  Status StartNodes();
  Status PreflightSsh();
  std::vector<std::string> SshArgv(const HostEntry& h, const std::string& remote_command) const;
  std::vector<std::string> RemoteNode(const NodeArgsOptions& n) const;
  NodeArgsOptions SshNode(const NodePlan& p) const;
  MpiOptions Mpi() const;
  Started& Spawn(const std::string& name, const std::string& where, Role role, std::vector<std::string> argv,
                 bool stdin_pipe);
  // A launched process that ended before it was asked to: the job fails, with its log's end.
  Status CheckStarted();
  // Orders every node to stop (`why` in etcd), waits for them, then forces; etcd last.
  void StopEverything(const std::string& why);
  std::string LogPath(const std::string& name) const { return o_.run_dir + "/logs/" + name + ".log"; }
  std::string Tail(const std::string& name) const;
  bool external_etcd() const { return !o_.etcd.empty() || spec_.external_etcd(); }

  LaunchOptions o_;
  const std::atomic<bool>* stop_;
  supervise::TerminalConsole console_;
  std::optional<supervise::RunDirLock> lock_;
  spec::JobSpec spec_;
  std::string spec_text_;
  std::vector<HostEntry> hosts_;
  std::vector<NodePlan> plan_;
  std::string etcd_endpoint_;
  std::unique_ptr<etcd::EtcdClient> etcd_;
  std::vector<std::unique_ptr<Started>> started_;  // etcd (if ours) first
  JobConfig job_;
  security::JobSecret secret_;
  std::shared_ptr<const security::TlsConfig> tls_;
  master::StatusReply last_;  // the master's last status
  bool stopping_ = false;
  bool stopped_ = false;
};

}  // namespace tessera::launch
