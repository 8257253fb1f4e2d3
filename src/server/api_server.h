// ApiServer: the platform's JSON REST API over HTTP (docs/platform-api.md): accounts, data sets,
// jobs and quotas. Every request but sign-up and login carries `Authorization: Bearer <token>`;
// every endpoint checks the caller's permission (authz.h); changes and refusals go to the audit
// log. Errors are `{"error": {"code": ..., "message": ...}}` with the matching HTTP status; bodies
// above 1 MiB (data chunks: above 4 MiB) are refused before they are read; unknown fields are
// refused. Thread-safety: Start/Stop from one thread; requests are served on the server's threads.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server_store/accounts.h"
#include "server_store/database.h"
#include "server_store/datasets.h"
#include "server/jobs.h"
#include "server_backends/k8s_backend.h"

namespace httplib {
class Server;
}

namespace tessera::server {

class ApiRoutes;

struct ServerOptions {
  AccountOptions accounts;
  std::string data_dir;     // files: uploads, data sets, code packages, job directories
  std::string tessera_bin;  // this program (the local backend runs `tessera local`)
  Resources capacity;       // what jobs may use at once
  bool refuse_over_quota = false;
  int64_t tick_ms = 1000;
  std::string tls_cert, tls_key;  // PEM files: serve HTTPS (both or neither)
  std::string web_dir;            // the platform's pages; empty: <exe>/../platform or ../share/tessera/platform
  std::string backend = "local";  // or "kubernetes"
  // The local backend runs each job in a sandbox (local_backend.h): the server must run as root.
  // Off: jobs run as the server's own user, unconfined.
  bool sandbox = true;
  sandbox::UidRange job_uids;           // the Unix users of jobs, one per namespace
  int64_t job_tasks_per_process = 256;  // a sandboxed job's task limit, per process of its quota
  // What the server keeps free on its disk: uploads that would take it are refused, and running
  // jobs whose directories grow while it is short are stopped.
  int64_t keep_free_mb = 1024;
  K8sOptions k8s;                 // for the kubernetes backend
};

class ApiServer {
 public:
  ApiServer(Database* db, ServerOptions options);
  ~ApiServer();

  // Recovers what a previous server left (imports under way), binds host:port (0: any free port)
  // and serves in the background.
  Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }
  const char* scheme() const { return options_.tls_cert.empty() ? "http" : "https"; }
  // Where the web pages are served from ("" when none were found).
  const std::string& web_dir() const { return web_dir_; }
  Jobs* jobs() { return jobs_.get(); }
  // Every route (method, path pattern); see ApiRoutes::routes().
  const std::vector<std::pair<std::string, std::string>>& routes() const;

 private:
  void Routes();
  Database* db_;
  ServerOptions options_;
  Accounts accounts_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<ApiRoutes> routes_;
  std::unique_ptr<Datasets> datasets_;
  std::unique_ptr<Jobs> jobs_;
  std::thread thread_;
  int port_ = 0;
  std::string web_dir_;
};

// Route groups (api_accounts.cc, api_datasets.cc, api_jobs.cc).
void AddAccountRoutes(ApiRoutes& r, Database* db);
void AddDatasetRoutes(ApiRoutes& r, Datasets* datasets, Jobs* jobs);
void AddJobRoutes(ApiRoutes& r, Jobs* jobs, Datasets* datasets);

}  // namespace tessera::server
