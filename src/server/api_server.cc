// The platform's REST API server (see api_server.h): owns the HTTP server and the services, and
// adds each group of routes.
#include "server/api_server.h"

#include <httplib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/http_limits.h"
#include "sandbox/sandbox_process.h"
#include "server/api_routes.h"
#include "server_backends/local_backend.h"

namespace tessera::server {

namespace {
constexpr size_t kMaxChunkBody = size_t{4} << 20;  // a data chunk or a code package
// HTTPS with the given certificate chain and key (PEM files), or plain HTTP without them.
std::unique_ptr<httplib::Server> NewHttpServer(const ServerOptions& o) {
  if (o.tls_cert.empty()) return std::make_unique<httplib::Server>();
  return std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
}

// The platform's pages: the build tree's, or an installed copy beside the binary.
std::string FindWebPages(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (const auto& dir : {exe.parent_path() / "../platform", exe.parent_path() / "../share/tessera/platform"}) {
    if (std::filesystem::exists(dir / "index.html", ec)) return std::filesystem::weakly_canonical(dir, ec).string();
  }
  return "";
}

}  // namespace

ApiServer::ApiServer(Database* db, ServerOptions options)
    : db_(db),
      options_(std::move(options)),
      accounts_(db, options_.accounts),
      http_(NewHttpServer(options_)),
      routes_(std::make_unique<ApiRoutes>(http_.get(), &accounts_)),
      datasets_(std::make_unique<Datasets>(db, options_.data_dir)) {
  JobsOptions jo;
  jo.data_dir = options_.data_dir;
  jo.capacity = options_.capacity;
  jo.refuse_over_quota = options_.refuse_over_quota;
  jo.tick_ms = options_.tick_ms;
  jo.sandboxed = options_.backend == "local" && options_.sandbox;
  jo.keep_free_bytes = options_.keep_free_mb << 20;
  datasets_->set_keep_free_bytes(options_.keep_free_mb << 20);
  jo.job_uids = options_.job_uids;
  std::unique_ptr<Backend> backend;
  if (options_.backend == "kubernetes") {
    K8sOptions k = options_.k8s;
    k.data_dir = options_.data_dir;
    backend = std::make_unique<KubernetesBackend>(k);
  } else {
    LocalBackendOptions lo;
    lo.tessera_bin = options_.tessera_bin;
    lo.data_dir = options_.data_dir;
    lo.sandboxed = options_.sandbox;
    lo.tasks_per_process = options_.job_tasks_per_process;
    backend = std::make_unique<LocalBackend>(lo);
  }
  jobs_ = std::make_unique<Jobs>(db, datasets_.get(), std::move(backend), jo);
  Routes();
}

const std::vector<std::pair<std::string, std::string>>& ApiServer::routes() const {
  return routes_->routes();
}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::Routes() {
  httplib::Server& s = *http_;
  // Without it, an answer written in two pieces (headers, then body) waits for the client's
  // delayed ACK: 40 ms per request on a kept-alive connection (bench/api_bench: reading one job
  // went from 150 to 3,500 requests/s). Set before the socket is bound, which is when it applies.
  s.set_tcp_nodelay(true);
  LimitHttpRequests(
      s, kMaxHttpRequestBody,
      [](const std::string& path) {
        return path.rfind("/api/v1/uploads/", 0) == 0 || path.find("/packages/") != std::string::npos;
      },
      kMaxChunkBody, nullptr, /*json_errors=*/true);
  AddAccountRoutes(*routes_, db_);
  AddDatasetRoutes(*routes_, datasets_.get(), jobs_.get());
  AddJobRoutes(*routes_, jobs_.get(), datasets_.get());
  // The web pages at / (the API's paths are no files there, so they reach the routes).
  web_dir_ = FindWebPages(options_.web_dir);
  if (!web_dir_.empty()) {
    s.set_mount_point("/", web_dir_);
  } else {
    s.Get("/", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("tessera server: the web pages were not found (looked in <binary>/../platform and "
                      "<binary>/../share/tessera/platform); the API is at /api/v1\n",
                      "text/plain");
    });
  }
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string code =
        res.status == 404 ? "not_found" : (res.status == 413 ? "too_large" : "bad_request");
    const std::string msg = res.status == 404 ? "no such endpoint: " + req.method + " " + req.path
                            : res.status == 413
                                ? "request body too large: at most 1 MiB of JSON, and data chunks "
                                  "of at most 4 MiB sent as application/octet-stream"
                                : "the request was refused";
    res.set_content(nlohmann::json{{"error", {{"code", code}, {"message", msg}}}}.dump(), "application/json");
  });
}

Status ApiServer::Start(const std::string& host, int port) {
  if (options_.tls_cert.empty() != options_.tls_key.empty())
    return Status::InvalidArgument("give both --cert and --key for HTTPS, or neither");
  if (options_.backend == "kubernetes" && options_.k8s.data_claim.empty())
    return Status::InvalidArgument(
        "--backend kubernetes needs --k8s-data-claim NAME: the ReadWriteMany claim that holds --data-dir, "
        "which "
        "every pod mounts");
  if (options_.backend == "local" && options_.sandbox) {
    TESSERA_RETURN_IF_ERROR(sandbox::CheckSandboxHost());
    // Control groups carry each job's limits, and are how a job is found and stopped.
    auto probe =
        Cgroup::Create(CgroupLayout::Detect(), "tessera-server-probe-" + std::to_string(::getpid()), true);
    if (!probe.ok())
      return probe.status().WithContext("sandboxed jobs need control groups (or run with --sandbox off)");
    (void)(*probe)->Remove();
    // The data directory is the server's alone: its database, every namespace's data.
    if (::chmod(options_.data_dir.c_str(), 0700) != 0)
      return Status::Unavailable("cannot make " + options_.data_dir +
                                 " the server's alone: " + std::strerror(errno));
  }
  if (!http_->is_valid())
    return Status::InvalidArgument("cannot use --cert " + options_.tls_cert + " and --key " +
                                   options_.tls_key + ": not a readable PEM certificate and its private key");
  TESSERA_RETURN_IF_ERROR(datasets_->Start());
  TESSERA_RETURN_IF_ERROR(jobs_->Start());
  if (port == 0) {
    port_ = http_->bind_to_any_port(host);
    if (port_ <= 0) return Status::Unavailable("cannot bind the API on " + host);
  } else {
    if (!http_->bind_to_port(host, port))
      return Status::Unavailable("cannot bind the API on " + host + ":" + std::to_string(port));
    port_ = port;
  }
  thread_ = ServeInBackground(*http_);
  return Status::OK();
}

void ApiServer::Stop() {
  if (http_) http_->stop();
  if (thread_.joinable()) thread_.join();
  if (jobs_) jobs_->Stop();
  if (datasets_) datasets_->Stop();
}

}  // namespace tessera::server
