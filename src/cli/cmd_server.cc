// `tessera server`: the training platform's API server (see src/server and docs/platform-api.md).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "cli/commands.h"
#include "cli/etcd_flags.h"
#include "cli/signals.h"
#include "common/math_threads.h"
#include "sandbox/job_users.h"
#include "server/api_server.h"
#include "server_store/database.h"
#include "server_store/schema.h"

namespace tessera::cli {
namespace {

struct ServerFlags {
  std::string data_dir;
  std::string database;
  std::string listen = "127.0.0.1";
  int port = 8780;
  bool require_approval = false;
  double cpus = 0;
  int64_t memory_mb = 0;
  int64_t gpus = 0;
  std::string over_quota = "queue";
  bool stop_jobs_on_exit = false;
  std::string cert, key;
  std::string backend = "local";
  std::string sandbox = "on";
  std::string job_uids = "61000000-61099999";
  int64_t job_tasks_per_process = 256;
  int64_t keep_free_mb = 1024;
  server::K8sOptions k8s;
};

// This machine's CPUs (those this process may use, within its CPU quota) and memory (MB), the
// default capacity of the local backend.
server::Resources MachineResources() {
  server::Resources r;
  r.cpu = std::max(1, HostCores());
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  r.memory_mb = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / (1 << 20) : 1024;
  return r;
}

int RunServer(const ServerFlags& f) {
  std::atomic<bool> stop{false};
  SignalWatcher signals([&](int) { stop = true; });
  if (f.data_dir.empty())
    return Fail("server",
                Status::InvalidArgument("give --data-dir DIR: the server keeps its files there (and its "
                                        "SQLite database, unless --database names a PostgreSQL)"));
  const std::string data_dir = std::filesystem::absolute(f.data_dir).lexically_normal().string();
  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  if (ec)
    return Fail("server", Status::Unavailable("cannot create --data-dir " + data_dir + ": " + ec.message()));
  std::string where = f.database;
  if (where.empty()) where = data_dir + "/server.db";
  auto db = server::OpenDatabase(where);
  if (!db.ok()) return Fail("server", db.status());
  if (Status s = server::Migrate(**db, server::ServerSchema()); !s.ok()) return Fail("server", s);
  server::ServerOptions so;
  so.accounts.require_approval = f.require_approval;
  so.data_dir = data_dir;
  so.tessera_bin = SelfPath();
  so.capacity = MachineResources();
  if (f.cpus > 0) so.capacity.cpu = f.cpus;
  if (f.memory_mb > 0) so.capacity.memory_mb = f.memory_mb;
  so.capacity.gpus = f.gpus;
  so.refuse_over_quota = f.over_quota == "refuse";
  so.backend = f.backend;
  so.sandbox = f.sandbox == "on";
  auto uids = sandbox::ParseUidRange(f.job_uids);
  if (!uids.ok()) return Fail("server", uids.status().WithContext("--job-uids"));
  so.job_uids = *uids;
  so.job_tasks_per_process = f.job_tasks_per_process;
  so.keep_free_mb = f.keep_free_mb;
  if (!so.sandbox && f.backend == "local")
    std::fprintf(stderr,
                 "tessera server: --sandbox off: jobs run as this server's own user, with its rights and its "
                 "view of the machine; only for a server you alone use\n");
  so.k8s = f.k8s;
  so.tls_cert = f.cert;
  so.tls_key = f.key;
  server::ApiServer api(db->get(), so);
  if (Status s = api.Start(f.listen, f.port); !s.ok()) return Fail("server", s);
  if (!api.web_dir().empty())
    std::printf("tessera server: web pages at %s://%s:%d/\n", api.scheme(), f.listen.c_str(), api.port());
  std::printf("tessera server: API at %s://%s:%d/api/v1 (state: %s %s)\n", api.scheme(), f.listen.c_str(),
              api.port(), (*db)->Kind().c_str(), (*db)->Kind() == "sqlite" ? where.c_str() : "database");
  std::fflush(stdout);
  while (!stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (f.stop_jobs_on_exit) {
    std::printf("tessera server: stopping its jobs (--stop-jobs-on-exit)\n");
    std::fflush(stdout);
    api.jobs()->StopAll(30000);
  } else {
    std::printf(
        "tessera server: stopped; jobs still running go on, and a server started again on %s takes them "
        "back\n",
        data_dir.c_str());
  }
  api.Stop();
  return 0;
}

}  // namespace

void RegisterServer(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ServerFlags>();
  auto* cmd = app.add_subcommand(
      "server",
      "Run the training platform (docs/platform-api.md): its web pages at / and its REST API at\n"
      "/api/v1 (docs/openapi.json): accounts, namespaces and roles, API tokens, data set uploads,\n"
      "jobs run on this machine through `tessera local` (or on Kubernetes, --backend kubernetes)\n"
      "with a queue by priority and quotas, logs and cost history kept after jobs end, an audit\n"
      "log. Its state is in SQLite under --data-dir or in PostgreSQL (--database postgresql://...);\n"
      "HTTPS with --cert/--key. The first user to sign up administers the server.");
  cmd->add_option("--data-dir", f->data_dir,
                  "directory of the server's files: data sets, uploads, code, jobs (and\nits SQLite "
                  "database, DIR/server.db)")
      ->required();
  cmd->add_option("--database", f->database,
                  "a PostgreSQL URL instead of SQLite, e.g. postgresql://user@host/db");
  cmd->add_option("--listen", f->listen, "address to serve on")->capture_default_str();
  cmd->add_option("--port", f->port, "port (0: any free port, printed)")->capture_default_str();
  cmd->add_flag("--require-approval", f->require_approval, "new users wait for an administrator's approval");
  cmd->add_option("--cpus", f->cpus, "CPUs the jobs may use at once (default: this machine's)");
  cmd->add_option("--memory-mb", f->memory_mb,
                  "memory the jobs may use at once, in MB (default: this machine's)");
  cmd->add_option("--gpus", f->gpus, "GPUs the jobs may use at once")->capture_default_str();
  cmd->add_option("--over-quota", f->over_quota,
                  "a submission over its namespace's quota is queued until it fits, or refused")
      ->check(CLI::IsMember({"queue", "refuse"}))
      ->capture_default_str();
  cmd->add_option("--cert", f->cert, "serve HTTPS with this certificate (PEM; the chain, server's first)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--key", f->key, "the certificate's private key (PEM)")->check(CLI::ExistingFile);
  cmd->add_option("--backend", f->backend,
                  "where jobs run: local (this machine, through `tessera local`) or kubernetes (the cluster\n"
                  "kubectl reaches, from the manifests of `tessera deploy k8s`; see docs/platform-api.md)")
      ->check(CLI::IsMember({"local", "kubernetes"}))
      ->capture_default_str();
  cmd->add_option(
         "--sandbox", f->sandbox,
         "local backend: run each job in a sandbox of its own (docs/security.md): as a Unix user of\n"
         "its namespace, in its own mount, PID, IPC and network namespaces, within a control group\n"
         "carrying its quota; needs root and bubblewrap. off: jobs run as this server's user,\n"
         "unconfined (a server you alone use)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--job-uids", f->job_uids,
                  "local backend, sandboxed: the Unix user ids this server gives its namespaces' jobs, one\n"
                  "per namespace (FIRST-LAST; ids the host already knows are skipped)")
      ->capture_default_str();
  cmd->add_option(
         "--job-tasks-per-process", f->job_tasks_per_process,
         "local backend, sandboxed: the tasks (processes and threads) a job may have, per process its\n"
         "quota counts (pservers and trainers), 3 more for its etcd, master and supervisor")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option(
         "--keep-free-mb", f->keep_free_mb,
         "megabytes the server keeps free on the disk of --data-dir: an upload that would take them\n"
         "is refused before it starts, and a job whose directory grows while they are short is stopped")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--kubectl", f->k8s.kubectl, "kubernetes: the kubectl program")->capture_default_str();
  cmd->add_option("--k8s-image", f->k8s.image, "kubernetes: the Tessera image of every pod")
      ->capture_default_str();
  cmd->add_option(
      "--k8s-data-claim", f->k8s.data_claim,
      "kubernetes: the ReadWriteMany PersistentVolumeClaim holding --data-dir (mounted by every pod)");
  cmd->add_option("--k8s-namespace-prefix", f->k8s.namespace_prefix,
                  "kubernetes: a namespace's jobs run in the Kubernetes namespace PREFIX+NAME");
  cmd->add_flag("--stop-jobs-on-exit", f->stop_jobs_on_exit,
                "stop every job when the server stops (by default they go on, and a restarted server\n"
                "takes them back)");
  cmd->callback([f, exit_code] { *exit_code = RunServer(*f); });
}

}  // namespace tessera::cli
