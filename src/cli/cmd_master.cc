// `tessera master`: run a master (the leader, or a standby waiting in the election).
#include <limits>

#include "cli/address_flags.h"
#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "common/flag_names.h"
#include "common/logging.h"
#include "common/strings.h"
#include "master/master_node.h"

namespace tessera::cli {
namespace {

struct MasterFlags {
  EtcdFlags etcd;
  std::string store, dataset;
  AddressFlags address;
  int port = 0;
  std::string http_host;
  int http_port = 0;
  std::string log_dir;
  std::string web_dir;
  std::string history_file;
  int chunks_per_task = 0;
  int64_t min_tasks = -1;
  int64_t min_task_records = 64;
  double task_timeout_s = 60;
  int max_failures = 3;
  int passes = 1;
  uint64_t seed = 1;
  bool no_split = false;
  bool follow = false;
  int64_t lease_ttl = 10;
  std::string log_level = "info";
  std::string log_file;
};

int RunMaster(const MasterFlags& f) {
  std::mutex mu;
  master::MasterNode* node_ptr = nullptr;
  SignalWatcher watcher([&](int) {
    std::lock_guard<std::mutex> lock(mu);
    if (node_ptr) node_ptr->Stop();
  });
  LogOptions lo;
  lo.job = f.etcd.job;
  lo.node = "master";
  lo.level = f.log_level;
  lo.file = f.log_file;
  if (Status s = InitLogging(lo); !s.ok()) return Fail("master", s);
  auto eo = EtcdOptionsFromFlags(f.etcd);
  if (!eo.ok()) return Fail("master", eo.status());
  if (f.lease_ttl < 2)
    return Fail("master", Status::InvalidArgument("--lease-ttl must be at least 2 seconds"));
  master::MasterOptions o;
  o.etcd = *eo;
  o.job = f.etcd.job;
  o.secret_file = f.etcd.secret_file;
  o.tls_ca_file = f.etcd.tls_ca;
  o.tls_cert_file = f.etcd.tls_cert;
  o.tls_key_file = f.etcd.tls_key;
  o.store = f.store;
  o.dataset = f.dataset;
  auto addr = ResolveAddressFlags(f.address, eo->endpoints);
  if (!addr.ok()) return Fail("master", addr.status());
  o.host = addr->listen;
  o.advertise = addr->advertise;
  o.port = f.port;
  o.http_host = f.http_host;
  o.http_port = f.http_port;
  o.log_dir = f.log_dir;
  o.web_dir = f.web_dir;
  o.history_file = f.history_file;
  o.lease_ttl_seconds = f.lease_ttl;
  o.queue.chunks_per_task = f.chunks_per_task;
  o.queue.min_tasks = f.min_tasks;  // -1: the master's default for the job (see master_node.h)
  o.queue.min_task_records = f.min_task_records;
  o.queue.timeout_ms = static_cast<int64_t>(f.task_timeout_s * 1000);
  o.queue.max_failures = f.max_failures;
  o.queue.passes = f.passes;
  o.queue.seed = f.seed;
  o.split_tasks = !f.no_split;
  o.queue.follow = f.follow;
  master::MasterNode node(o);
  {
    std::lock_guard<std::mutex> lock(mu);
    node_ptr = &node;
    if (watcher.received()) node.Stop();
  }
  Status s = node.Run();
  {
    std::lock_guard<std::mutex> lock(mu);
    node_ptr = nullptr;
  }
  if (s.ok()) return 0;
  if (s.code() == StatusCode::kAborted) return 3;
  return Fail("master", s);
}

}  // namespace

void RegisterMaster(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<MasterFlags>();
  auto* cmd = app.add_subcommand(
      flags::kCommandMaster,
      "Run a master for a job: it hands the data set's chunks out to trainers as tasks, pass after\n"
      "pass, and keeps its whole state in etcd. Start several: one leads, the others wait as\n"
      "standbys and take over within the lease TTL if it dies. Exit codes: 0 after SIGTERM/SIGINT,\n"
      "3 when deposed or its lease was lost, 1 on errors.");
  AddEtcdFlags(cmd, &f->etcd);
  cmd->add_option(flags::kStore, f->store, "data set store (a path every trainer can read)")
      ->envname(flags::kEnvStore)
      ->required();
  cmd->add_option(flags::kDataset, f->dataset, "data set to train on")->required();
  cmd->add_option(
         flags::kChunksPerTask, f->chunks_per_task,
         "chunks in one task; 0: as many as hold about 4 MiB of records, while a pass keeps at least "
         "--min-tasks tasks")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option(
         flags::kMinTasks, f->min_tasks,
         "when whole-chunk tasks would be fewer than this, cut chunks into record ranges so there are "
         "about this many (a small data set still spreads over every trainer); -1: 4 x the job's min "
         "trainers, at least 8; 0: never cut")
      ->capture_default_str();
  cmd->add_option(flags::kMinTaskRecords, f->min_task_records,
                  "the smallest record range a cut chunk gives a task (a trainer's batch size)")
      ->capture_default_str();
  cmd->add_option(flags::kTaskTimeout, f->task_timeout_s,
                  "seconds before a pending task goes back to the queue")
      ->capture_default_str();
  cmd->add_option(flags::kMaxFailures, f->max_failures,
                  "failures of a task tolerated before it is given up for the pass")
      ->capture_default_str();
  cmd->add_option(flags::kPasses, f->passes, "passes over the data set")->capture_default_str();
  cmd->add_option("--seed", f->seed, "shuffling seed")->capture_default_str();
  cmd->add_flag("--follow", f->follow,
                "follow the data set: chunks appended to it while the job runs (`tessera upload --append`) "
                "become tasks too, in order, until the job's follow/stop key is written in etcd; one pass");
  cmd->add_flag("--no-split-tasks", f->no_split,
                "idle trainers do not take the rest of a slow trainer's task (by default, once no untouched "
                "task is left, the master cuts what a trainer has left of its task in two for an idle one)");
  AddAddressFlags(cmd, &f->address);
  cmd->add_option("--port", f->port, "port (0: any free port)")->capture_default_str();
  cmd->add_option(
      flags::kHttpHost, f->http_host,
      "address the web console, /metrics, /healthz and /readyz bind (default 127.0.0.1; anywhere else all "
      "but the probes need the job's console token: `tessera status` prints the link; docs/security.md)");
  cmd->add_option(flags::kHttpPort, f->http_port,
                  "port of the web console and /metrics (0: any free port, printed at start; -1: off)")
      ->capture_default_str();
  cmd->add_option(
      flags::kLogDir, f->log_dir,
      "directory of the job's <node>.log files, shown in the console's logs panel (tessera local sets it)");
  cmd->add_option(flags::kHistoryFile, f->history_file,
                  "while leading, append the console's history (every cost report and evaluation, the nodes, "
                  "the job's status) to this JSON-lines file, so `tessera console --run` can show it later "
                  "(tessera local: RUN/history.jsonl)");
  cmd->add_option("--web-dir", f->web_dir,
                  "the console page's files (default: beside this program, ../console in a build tree, "
                  "../share/tessera/web installed)");
  cmd->add_option(flags::kLeaseTtl, f->lease_ttl, "seconds after which a dead master is replaced")
      ->capture_default_str();
  cmd->add_option("--log-level", f->log_level, "trace, debug, info, warn, error")->capture_default_str();
  cmd->add_option("--log-file", f->log_file, "also write the log to this file");
  cmd->callback([f, exit_code] { *exit_code = RunMaster(*f); });
}

}  // namespace tessera::cli
