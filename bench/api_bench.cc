// api_bench: requests per second of the platform API's job listing and metric reads with 1,000
// jobs in the database (each with 200 cost and evaluation points), on SQLite and on PostgreSQL.
// The jobs are submitted through the server library (validated like any submission) into the
// database of a data directory, marked ended, then a real `tessera server` serves them and
// client threads read them over HTTP. Prints a Markdown table.
#include <httplib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "common/clock.h"
#include "common/digest.h"
#include "common/files.h"
#include "harness/postgres.h"
#include "harness/subprocess.h"
#include "server/jobs.h"
#include "server_backends/local_backend.h"
#include "server_store/database.h"
#include "server_store/datasets.h"
#include "server_store/schema.h"

namespace tessera::bench {
namespace {

using Json = nlohmann::json;
using testing::BuildPath;

struct Figures {
  double rps = 0, p50_ms = 0, p99_ms = 0;
};

// `threads` clients, each with its own connection, call `path(i)` for `seconds`.
Figures Hammer(int port, const std::string& token, int threads, double seconds,
               const std::function<std::string(int64_t)>& path) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(threads);
  std::atomic<int64_t> errors{0};
  std::vector<std::thread> ts;
  const auto start = Now();
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", port);
      c.set_keep_alive(true);
      c.set_bearer_token_auth(token.c_str());
      for (int64_t i = t; !stop; i += threads) {
        const auto a = Now();
        auto r = c.Get(path(i));
        if (!r || r->status != 200) ++errors;
        lat[t].push_back(std::chrono::duration<double, std::milli>(Now() - a).count());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : ts) th.join();
  const double secs = std::chrono::duration<double>(Now() - start).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  if (errors > 0)
    std::fprintf(stderr, "api_bench: %lld requests failed\n", static_cast<long long>(errors.load()));
  if (all.empty()) return {};
  return {static_cast<double>(all.size()) / secs, all[all.size() / 2], all[all.size() * 99 / 100]};
}

// Fills the database at `where` with `jobs` ended jobs of namespace ada, each with `points`
// metric points; returns their ids.
StatusOr<std::vector<std::string>> Fill(const std::string& where, const std::string& data_dir, int jobs,
                                        int points) {
  TESSERA_ASSIGN_OR_RETURN(auto db, server::OpenDatabase(where));
  server::Datasets datasets(db.get(), data_dir);
  server::JobsOptions jo;
  jo.data_dir = data_dir;
  jo.capacity.cpu = 64;  // never started: the capacity only has to admit them
  jo.capacity.memory_mb = 1 << 20;
  server::LocalBackendOptions lo;
  lo.tessera_bin = BuildPath("src/tessera");
  lo.data_dir = data_dir;
  lo.sandboxed = false;  // never started
  server::Jobs j(db.get(), &datasets, std::make_unique<server::LocalBackend>(lo), jo);
  TESSERA_ASSIGN_OR_RETURN(auto owner, db->Query("SELECT id FROM users WHERE name = 'ada'"));
  if (owner.empty()) return Status::Internal("no user ada");
  std::vector<std::string> ids;
  const int64_t t0 = WallMillis() - int64_t{jobs} * 60000;
  for (int i = 0; i < jobs; ++i) {
    server::Submission spec;
    spec.training.name = "bench";
    spec.training.model = "mlp";
    spec.training.dataset = "d";
    spec.training.passes = 10;
    TESSERA_ASSIGN_OR_RETURN(server::JobInfo info, j.Submit("ada", owner[0].Text(0), spec, t0 + i * 60000));
    ids.push_back(info.id);
    TESSERA_RETURN_IF_ERROR(db->InTransaction([&](server::Sql& sql) -> Status {
      TESSERA_RETURN_IF_ERROR(
          sql.Exec("UPDATE jobs SET state = 'succeeded', reason = 'every pass done', started_ms = ?, "
                   "ended_ms = ? WHERE id = ?",
                   {t0 + i * 60000 + 1000, t0 + i * 60000 + 50000, info.id}));
      for (int p = 1; p <= points; ++p) {
        Json point = p % 10 == 0
                         ? Json{{"type", "eval"}, {"metric", "accuracy"}, {"value", 0.8}, {"pass", p / 20}}
                         : Json{{"type", "cost"}, {"cost", 1.0 / p}, {"trainer", "0"}, {"pass", p / 20}};
        point["seq"] = p;
        point["step"] = p * 10;
        point["time_ms"] = t0 + i * 60000 + p * 100;
        TESSERA_RETURN_IF_ERROR(sql.Exec("INSERT INTO job_metrics (job_id, seq, point) VALUES (?, ?, ?)",
                                         {info.id, int64_t{p}, point.dump()}));
      }
      return Status::OK();
    }));
  }
  return ids;
}

struct Server {
  std::unique_ptr<testing::Subprocess> process;
  int port = 0;
};

StatusOr<Server> StartServer(const std::string& data_dir, const std::string& database,
                             const std::string& log) {
  testing::SpawnOptions o;
  o.argv = {BuildPath("src/tessera"), "server", "--port", "0", "--data-dir", data_dir};
  if (!database.empty()) o.argv.insert(o.argv.end(), {"--database", database});
  o.log_path = log;
  TESSERA_ASSIGN_OR_RETURN(auto p, testing::Subprocess::Spawn(o));
  if (!p->WaitForOutput("API at http://", std::chrono::seconds(30)))
    return Status::Unavailable("the server did not start: " + p->Output());
  const std::string out = p->Output();
  const size_t at = out.find("127.0.0.1:") + 10;
  Server s;
  s.port = std::atoi(out.c_str() + at);
  s.process = std::move(p);
  return s;
}

int RunBackend(const std::string& kind, int jobs, int points, int threads, double seconds) {
  auto dir = MakeTempDir("api-bench-");
  if (!dir.ok()) return 1;
  struct Cleanup {  // whatever way this returns
    std::string d;
    ~Cleanup() { (void)RemoveAll(d); }
  } cleanup{*dir};
  std::unique_ptr<testing::PostgresServer> pg;
  std::string database;
  if (kind == "postgresql") {
    std::string why;
    pg = testing::PostgresServer::Start(&why);
    if (!pg) {
      std::fprintf(stderr, "api_bench: no PostgreSQL: %s\n", why.c_str());
      return 1;
    }
    database = pg->Url();
  }
  const std::string data_dir = *dir + "/server";
  // The account and a small data set through the API; then the jobs straight into its database.
  std::string token;
  {
    auto s = StartServer(data_dir, database, *dir + "/server-0.log");
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.status().ToString().c_str()), 1;
    httplib::Client c("127.0.0.1", s->port);
    c.Post("/api/v1/signup", R"({"name": "ada", "password": "correct horse"})", "application/json");
    auto login =
        c.Post("/api/v1/login", R"({"name": "ada", "password": "correct horse"})", "application/json");
    token = Json::parse(login->body)["token"];
    c.set_bearer_token_auth(token.c_str());
    const std::string data = "1 2 3\n";
    auto up =
        c.Post("/api/v1/namespaces/ada/uploads",
               R"({"name": "d", "format": "text", "files": {"input": {"size": 6}}})", "application/json");
    const std::string id = Json::parse(up->body)["id"];
    c.Put("/api/v1/uploads/" + id + "/files/input?offset=0", {{"X-Chunk-SHA256", Sha256Hex(data)}}, data,
          "application/octet-stream");
    c.Post("/api/v1/uploads/" + id + "/finish", "", "application/json");
    for (int i = 0; i < 100; ++i) {
      auto u = c.Get("/api/v1/uploads/" + id);
      if (u && Json::parse(u->body).value("state", "") == "done") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    s->process->Terminate(std::chrono::seconds(10));
  }
  const auto fill_start = Now();
  auto ids = Fill(database.empty() ? data_dir + "/server.db" : database, data_dir, jobs, points);
  if (!ids.ok()) return std::fprintf(stderr, "api_bench: %s\n", ids.status().ToString().c_str()), 1;
  const double fill_s = std::chrono::duration<double>(Now() - fill_start).count();
  auto s = StartServer(data_dir, database, *dir + "/server-1.log");
  if (!s.ok()) return 1;
  const std::vector<std::string>& job_ids = *ids;
  Figures list = Hammer(s->port, token, threads, seconds,
                        [](int64_t) { return std::string("/api/v1/namespaces/ada/jobs?limit=100"); });
  Figures one = Hammer(s->port, token, threads, seconds, [&](int64_t i) {
    return "/api/v1/jobs/" + job_ids[static_cast<size_t>(i) % job_ids.size()];
  });
  Figures metrics = Hammer(s->port, token, threads, seconds, [&](int64_t i) {
    return "/api/v1/jobs/" + job_ids[static_cast<size_t>(i) % job_ids.size()] + "/metrics";
  });
  auto row = [&](const char* what, const Figures& f) {
    std::printf("| %s | %s | %.0f | %.1f | %.1f |\n", kind.c_str(), what, f.rps, f.p50_ms, f.p99_ms);
  };
  row("list 100 of the jobs", list);
  row("read one job (with its events)", one);
  row("read a job's 200 metric points", metrics);
  std::fprintf(stderr, "api_bench: %s: %d jobs with %d points each written in %.1f s\n", kind.c_str(), jobs,
               points, fill_s);
  s->process->Terminate(std::chrono::seconds(10));
  return 0;
}

}  // namespace
}  // namespace tessera::bench

int main(int argc, char** argv) {
  CLI::App app{"api_bench: the platform API's read throughput with 1,000 jobs in its database"};
  int jobs = 1000, points = 200, threads = 4;
  double seconds = 5;
  std::vector<std::string> backends = {"sqlite", "postgresql"};
  app.add_option("--jobs", jobs, "jobs in the database")->capture_default_str();
  app.add_option("--points", points, "metric points per job")->capture_default_str();
  app.add_option("--threads", threads, "client threads, one connection each")->capture_default_str();
  app.add_option("--seconds", seconds, "per measurement")->capture_default_str();
  app.add_option("--backend", backends, "sqlite, postgresql");
  CLI11_PARSE(app, argc, argv);
  std::printf("| database | request | requests/s | p50 ms | p99 ms |\n| --- | --- | --- | --- | --- |\n");
  for (const auto& b : backends)
    if (tessera::bench::RunBackend(b, jobs, points, threads, seconds) != 0) return 1;
  return 0;
}
